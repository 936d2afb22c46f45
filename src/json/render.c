/*
 * render.c — Python-identical JSON output (see render.h for the rules and why).
 *
 * The float formatting finds the shortest decimal that reads back to the same double the
 * way David Gay's dtoa mode 0 (behind Python's repr) defines it: for precision 1, 2, ... 17
 * take the correctly rounded %.*e digits (glibc's printf is exact) and keep the first that
 * strtod maps back to x. Near a power of two the rounding interval of x is lopsided, so the
 * nearest p-digit decimal can miss it while its neighbour one unit away hits it; the
 * neighbours are therefore tried too before moving to p + 1. The digits are then laid out
 * like Python's float_repr_style 'short'.
 */
#include "json/render.h"

#include "core/error.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- floats ---------------------------------------------------------------------------- */

/* A decimal significand of at most 17 digits and its scientific exponent: digits d1d2..dn
 * mean d1.d2..dn x 10^exp10. */
typedef struct decimal {
    uint64_t digits;
    int n_digits;
    int exp10;
} decimal;

static double decimal_value(const decimal *d) {
    char buf[48];
    snprintf(buf, sizeof buf, "%llue%d", (unsigned long long)d->digits, d->exp10 - (d->n_digits - 1));
    return strtod(buf, NULL);
}

/* Parse the output of "%.*e" ("d.ddde+XX", no sign) into a decimal. */
static decimal decimal_from_e(const char *s) {
    decimal d = {0, 0, 0};
    for (; *s && *s != 'e'; s++) {
        if (*s >= '0' && *s <= '9') {
            d.digits = d.digits * 10 + (uint64_t)(*s - '0');
            d.n_digits++;
        }
    }
    if (*s == 'e')
        d.exp10 = atoi(s + 1);
    return d;
}

static uint64_t pow10_u64(int n) {
    uint64_t p = 1;
    while (n-- > 0)
        p *= 10;
    return p;
}

/* 1 when x's significand is a power of two: its gap below is half its gap above, so the
 * interval of decimals that read back as x is lopsided. Elsewhere it is symmetric and the
 * nearest p-digit decimal is the only p-digit candidate worth trying. */
static int is_power_of_two_significand(double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits & ((UINT64_C(1) << 52) - 1)) == 0 && (bits >> 52 & 0x7ff) > 1;
}

/* The shortest decimal that reads back as x (x finite, > 0). */
static decimal shortest_decimal(double x) {
    char buf[48];
    int lopsided = is_power_of_two_significand(x);
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*e", precision - 1, x);
        decimal nearest = decimal_from_e(buf);
        if (decimal_value(&nearest) == x)
            return nearest;
        if (!lopsided)
            continue;
        /* Lopsided interval at a power of two: one neighbour may still round to x. */
        decimal up = nearest, down = nearest;
        up.digits++;
        if (up.digits == pow10_u64(precision)) {
            up.digits = pow10_u64(precision - 1);
            up.exp10++;
        }
        if (decimal_value(&up) == x)
            return up;
        if (down.digits > pow10_u64(precision - 1)) {
            down.digits--;
            if (decimal_value(&down) == x)
                return down;
        }
    }
    /* Unreachable: 17 significant digits always round-trip a double. */
    snprintf(buf, sizeof buf, "%.16e", x);
    return decimal_from_e(buf);
}

size_t json_format_double(double x, char out[JSON_DOUBLE_BUF]) {
    size_t n = 0;
    if (signbit(x)) {
        out[n++] = '-';
        x = -x;
    }
    if (x == 0) {
        memcpy(out + n, "0.0", 4);
        return n + 3;
    }
    decimal d = shortest_decimal(x);
    while (d.n_digits > 1 && d.digits % 10 == 0) {
        d.digits /= 10;
        d.n_digits--;
    }
    char digits[24];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)d.digits);
    int nd = d.n_digits;
    int decpt = d.exp10 + 1; /* digits read as 0.d1d2.. x 10^decpt */
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out[n++] = '0';
            out[n++] = '.';
            for (int i = 0; i < -decpt; i++)
                out[n++] = '0';
            memcpy(out + n, digits, (size_t)nd);
            n += (size_t)nd;
        } else if (decpt >= nd) {
            memcpy(out + n, digits, (size_t)nd);
            n += (size_t)nd;
            for (int i = nd; i < decpt; i++)
                out[n++] = '0';
            out[n++] = '.';
            out[n++] = '0';
        } else {
            memcpy(out + n, digits, (size_t)decpt);
            n += (size_t)decpt;
            out[n++] = '.';
            memcpy(out + n, digits + decpt, (size_t)(nd - decpt));
            n += (size_t)(nd - decpt);
        }
    } else {
        out[n++] = digits[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, digits + 1, (size_t)(nd - 1));
            n += (size_t)(nd - 1);
        }
        int e = d.exp10;
        n += (size_t)snprintf(out + n, JSON_DOUBLE_BUF - n, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    out[n] = '\0';
    return n;
}

/* ---- numbers --------------------------------------------------------------------------- */

size_t json_integer_digits(const json_value *v) {
    if (!v || v->type != JSON_NUMBER || v->u.num.kind != JSON_NUMBER_INTEGER)
        return 0;
    return v->u.num.len - (v->u.num.text[0] == '-');
}

int json_number_is_nonfinite(const json_value *v) {
    if (!v || v->type != JSON_NUMBER)
        return 0;
    if (v->u.num.kind == JSON_NUMBER_NONFINITE)
        return 1;
    return v->u.num.kind == JSON_NUMBER_REAL && !isfinite(v->u.num.real);
}

static int render_number(const json_value *v, const json_render_opts *opts, clef_strbuf *out) {
    if (v->u.num.kind == JSON_NUMBER_INTEGER) {
        if (json_integer_digits(v) > JSON_INT_MAX_DIGITS)
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "integer of %zu digits exceeds Python's limit of %d digits for int "
                             "conversion",
                             json_integer_digits(v), JSON_INT_MAX_DIGITS);
        if (strcmp(v->u.num.text, "-0") == 0)
            clef_strbuf_append_char(out, '0'); /* Python: int("-0") == 0 */
        else
            clef_strbuf_append(out, v->u.num.text, v->u.num.len);
        return CLEF_OK;
    }
    double x = v->u.num.real;
    if (json_number_is_nonfinite(v)) {
        if (!opts->allow_nonfinite)
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "number '%.40s' is not finite (Python reads it as %s)", v->u.num.text,
                             isnan(x) ? "nan" : "inf");
        clef_strbuf_append_str(out, isnan(x) ? "NaN" : x < 0 ? "-Infinity" : "Infinity");
        return CLEF_OK;
    }
    char buf[JSON_DOUBLE_BUF];
    size_t n = json_format_double(x, buf);
    clef_strbuf_append(out, buf, n);
    return CLEF_OK;
}

/* ---- strings --------------------------------------------------------------------------- */

void json_render_string(const char *s, size_t n, clef_strbuf *out) {
    static const char hex[] = "0123456789abcdef";
    clef_strbuf_append_char(out, '"');
    size_t run = 0; /* start of the pending run of bytes that need no escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = '\0';
                esc = u;
            }
            break;
        }
        if (esc) {
            clef_strbuf_append(out, s + run, i - run);
            clef_strbuf_append_str(out, esc);
            run = i + 1;
        }
    }
    clef_strbuf_append(out, s + run, n - run);
    clef_strbuf_append_char(out, '"');
}

/* ---- containers ------------------------------------------------------------------------ */

/* Python sorts str keys by code point; for valid UTF-8 that is unsigned byte order, with a
 * proper prefix first. */
static int compare_member_keys(const void *a, const void *b) {
    const json_member *x = *(const json_member *const *)a;
    const json_member *y = *(const json_member *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c != 0)
        return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static int render_value(const json_value *v, const json_render_opts *opts, clef_strbuf *out);

static int render_object(const json_value *v, const json_render_opts *opts, clef_strbuf *out) {
    size_t count = v->u.obj.count;
    const json_member **order = NULL;
    if (count > 0) {
        order = malloc(count * sizeof *order);
        if (!order)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory sorting %zu object keys", count);
        for (size_t i = 0; i < count; i++)
            order[i] = &v->u.obj.members[i];
        if (opts->sort_keys)
            qsort(order, count, sizeof *order, compare_member_keys);
    }
    int status = CLEF_OK;
    clef_strbuf_append_char(out, '{');
    for (size_t i = 0; i < count && status == CLEF_OK; i++) {
        if (i)
            clef_strbuf_append_char(out, ',');
        json_render_string(order[i]->key, order[i]->key_len, out);
        clef_strbuf_append_char(out, ':');
        status = render_value(order[i]->value, opts, out);
    }
    clef_strbuf_append_char(out, '}');
    free(order);
    return status;
}

static int render_value(const json_value *v, const json_render_opts *opts, clef_strbuf *out) {
    switch (v->type) {
    case JSON_NULL: clef_strbuf_append_str(out, "null"); return CLEF_OK;
    case JSON_FALSE: clef_strbuf_append_str(out, "false"); return CLEF_OK;
    case JSON_TRUE: clef_strbuf_append_str(out, "true"); return CLEF_OK;
    case JSON_NUMBER: return render_number(v, opts, out);
    case JSON_STRING: json_render_string(v->u.str.ptr, v->u.str.len, out); return CLEF_OK;
    case JSON_ARRAY: {
        clef_strbuf_append_char(out, '[');
        for (size_t i = 0; i < v->u.arr.count; i++) {
            if (i)
                clef_strbuf_append_char(out, ',');
            int status = render_value(v->u.arr.items[i], opts, out);
            if (status != CLEF_OK)
                return status;
        }
        clef_strbuf_append_char(out, ']');
        return CLEF_OK;
    }
    case JSON_OBJECT: return render_object(v, opts, out);
    }
    return clef_fail(CLEF_ERR_INTERNAL, "json_render: unknown value type %d", (int)v->type);
}

int json_render(const json_value *v, const json_render_opts *opts, clef_strbuf *out) {
    CLEF_ASSERT(v && opts && out);
    int status = render_value(v, opts, out);
    if (status != CLEF_OK)
        return status;
    return clef_strbuf_status(out);
}

int json_render_prompt(const json_value *v, clef_strbuf *out) {
    CLEF_ASSERT(v && out);
    if (v->type == JSON_STRING) {
        clef_strbuf_append(out, v->u.str.ptr, v->u.str.len);
        return clef_strbuf_status(out);
    }
    const json_render_opts opts = {.sort_keys = 1, .allow_nonfinite = 0};
    return json_render(v, &opts, out);
}
