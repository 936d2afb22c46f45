#!/usr/bin/env python3
"""gen_render_cases.py — JSON texts and what Python makes of them, for the C render test.

For every generated JSON text T the oracle is Python itself:
    sorted   = json.dumps(json.loads(T), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    unsorted = the same without sort_keys (the answers' layout)
or the marker ERROR when json.loads refuses T (e.g. an integer over Python's 4300-digit
limit). The texts cover the float edge cases (random bit patterns, subnormals, 5e-324,
powers of two, 1e16, 0.1+0.2, -0.0, long mantissas, overflow to inf), integers of any size
(2**53+1, 4300/4301 digits, -0), every control character, escapes, astral code points,
keys whose code-point order differs from UTF-16 order, duplicate keys, and nesting.

Output format (binary-safe, read by tests/json/test_json_render.c), one case after another:
    "<n_text> <n_sorted> <n_unsorted>\\n" TEXT SORTED UNSORTED "\\n"
with lengths in bytes of UTF-8; n_sorted = n_unsorted = -1 for ERROR.

Usage: python3 scripts/encode/gen_render_cases.py --count N --seed S --out FILE
"""
import argparse
import json
import math
import random
import struct


def random_double_bits(rng):
    while True:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(x):
            return x


def float_text(rng):
    """A JSON number text that Python reads as a float (or as inf when it overflows)."""
    kind = rng.randrange(14)
    if kind == 0:
        return repr(random_double_bits(rng))
    if kind == 1:  # subnormals and the smallest values
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(52) or 1))[0]
        return rng.choice([repr(x), "%.17e" % x, "%.3e" % x])
    if kind == 2:  # powers of two: lopsided rounding intervals
        e = rng.randint(-1074, 1023)
        return repr(math.ldexp(1.0, e) * rng.choice([1, -1]))
    if kind == 3:
        return rng.choice(["5e-324", "-5e-324", "4.9406564584124654e-324", "2.4703282292062328e-324",
                           "2.4703282292062327e-324", "1e16", "1e+16", "9999999999999998.0",
                           "1e15", "1.0e-4", "1e-5", "0.0001", "0.00001", "1e22", "1e23",
                           "0.30000000000000004", "0.1", "0.2", "-0.0", "0.0", "-0e0", "0e-10",
                           "1.7976931348623157e308", "1.7976931348623158e308", "1.8e308",
                           "1e400", "-1e400", "1e-400", "-1e-400", "2.2250738585072014e-308",
                           "2.2250738585072011e-308", "123456789012345678901234567890.5",
                           "9007199254740993.0", "9007199254740992.0", "1E5", "1.5E+300",
                           "0.1e1", "100e-2", "12345678901234567890e-30",
                           "NaN", "Infinity", "-Infinity"])
    if kind == 4:  # random decimal strings with long mantissas
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 30)))
        digits = digits.lstrip("0") or "0"
        frac = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 25)))
        exp = "" if rng.random() < 0.5 else "e%+d" % rng.randint(-330, 310)
        return ("-" if rng.random() < 0.3 else "") + digits + "." + frac + exp
    if kind == 5:  # values near the fixed/exponent switch
        e = rng.choice([-6, -5, -4, -3, 14, 15, 16, 17])
        return repr(rng.uniform(1, 10) * 10.0 ** e)
    if kind == 6:  # few significant digits at any scale
        return "%de%d" % (rng.randint(1, 999), rng.randint(-320, 300))
    if kind == 7:
        return repr(0.1 * rng.randint(0, 100000))
    if kind == 8:
        return repr(rng.random())
    if kind == 9:  # k/20000 +- ulps (the answers' rounding boundary)
        x = rng.randint(0, 20000) / 20000.0
        for _ in range(rng.randint(0, 2)):
            x = math.nextafter(x, rng.choice([-1.0, 2.0]))
        return repr(x)
    if kind == 10:
        return repr(rng.uniform(-1e6, 1e6))
    if kind == 11:
        return repr(float(rng.randint(0, 2**60)))
    if kind == 12:
        return "%.*e" % (rng.randint(0, 20), random_double_bits(rng))
    return "%.*f" % (rng.randint(1, 12), rng.uniform(-1000, 1000))


def int_text(rng):
    kind = rng.randrange(8)
    if kind == 0:
        return str(rng.randint(-10, 10))
    if kind == 1:
        return rng.choice(["0", "-0", str(2**53 + 1), str(2**63), str(-(2**63) - 1), str(2**64 + 1),
                           str(10**100), "1" * 4300, "-" + "9" * 4300, "1" * 4301])
    if kind == 2:
        n = rng.randint(1, 60)
        return ("-" if rng.random() < 0.4 else "") + str(rng.randint(1, 9)) + "".join(
            rng.choice("0123456789") for _ in range(n - 1))
    if kind == 3:
        return str(rng.randint(-(2**70), 2**70))
    return str(rng.randint(-100000, 100000))


ASTRAL = ["\U0001F600", "\U00010000", "\U0010FFFF", "\U0002A6D6"]
BMP = ["é", "ß", "Ω", "中", "文", "\u2028", "\u2029", "\ufeff", "\uffff", "\ue000", "\u00a0", "\u200b", "ﬁ"]


def string_text(rng):
    """A JSON string literal, written with a mix of raw characters and escapes."""
    out = ['"']
    for _ in range(rng.randint(0, 12)):
        k = rng.randrange(10)
        if k == 0:
            c = chr(rng.randrange(0x20))
            out.append(rng.choice(["\\u%04x" % ord(c), "\\u%04X" % ord(c)] +
                                  (["\\n"] if c == "\n" else []) + (["\\t"] if c == "\t" else [])))
        elif k == 1:
            out.append(rng.choice(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\x7f"]))
        elif k == 2:
            c = rng.choice(ASTRAL)
            if rng.random() < 0.5:
                hi, lo = divmod(ord(c) - 0x10000, 0x400)
                out.append("\\ud%03x\\ud%03x" % (0x800 + hi, 0xc00 + lo))
            else:
                out.append(c)
        elif k == 3:
            c = rng.choice(BMP)
            out.append(c if rng.random() < 0.5 else "\\u%04x" % ord(c))
        else:
            out.append(rng.choice("abcxyzABC019 _-.:,{}[]'"))
    out.append('"')
    return "".join(out)


def ws(rng):
    return rng.choice(["", "", "", " ", "\n", "\t ", "\r\n"])


def value_text(rng, depth):
    k = rng.randrange(10 if depth < 5 else 7)
    if k == 0:
        return rng.choice(["null", "true", "false"])
    if k in (1, 2):
        return float_text(rng)
    if k == 3:
        return int_text(rng)
    if k in (4, 5, 6):
        return string_text(rng)
    if k == 7:
        items = [value_text(rng, depth + 1) for _ in range(rng.randint(0, 5))]
        return "[" + ws(rng) + ("," + ws(rng)).join(items) + ws(rng) + "]"
    keys = [string_text(rng) for _ in range(rng.randint(0, 6))]
    if keys and rng.random() < 0.2:
        keys.append(rng.choice(keys))  # a duplicate: last value wins, first position kept
    members = [k + ws(rng) + ":" + ws(rng) + value_text(rng, depth + 1) for k in keys]
    return "{" + ws(rng) + ("," + ws(rng)).join(members) + ws(rng) + "}"


def oracle(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None, None
    dump = lambda sort: json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort)
    return dump(True), dump(False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    errors = 0
    with open(args.out, "wb") as f:
        for i in range(args.count):
            # Every case starts with a lone number so each float edge case is also seen bare.
            text = ws(rng) + (float_text(rng) if i % 3 == 0 else value_text(rng, 0)) + ws(rng)
            sorted_text, unsorted_text = oracle(text)
            t = text.encode("utf-8")
            if sorted_text is None:
                errors += 1
                f.write(b"%d -1 -1\n" % len(t) + t + b"\n")
            else:
                s, u = sorted_text.encode("utf-8"), unsorted_text.encode("utf-8")
                f.write(b"%d %d %d\n" % (len(t), len(s), len(u)) + t + s + u + b"\n")
    print(f"wrote {args.count} cases ({errors} refused by json.loads) to {args.out}")


if __name__ == "__main__":
    main()
