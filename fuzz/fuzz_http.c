/*
 * fuzz_http.c — libFuzzer target for the HTTP request path of `clef serve`: the input is the
 * raw bytes a client sends. The first input starts the real server (include/clef_server.h) on
 * 127.0.0.1 with the demo release and a token; every input is written to a fresh loopback
 * connection, the write side is shut, and every response read back is checked:
 *   - no 5xx (bad input is a 4xx; 505 for an unsupported HTTP version is libmicrohttpd's own
 *     correct answer and allowed), and an answer always comes or the connection closes
 *     within READ_TIMEOUT_S (a hang is a finding);
 *   - a JSON reply (Content-Type application/json) is valid JSON.
 * The server is freed at exit, so the sanitizer build also finds leaks on this path.
 * Corpus: fuzz/corpus/http (valid SystemOne / Workers AI / GET requests, broken ones).
 * The release is demo/clef-demo from the working directory, or $CLEF_FUZZ_HTTP_RELEASE.
 */
#include "clef.h"
#include "core/error.h"
#include "json/json.h"
#include "clef_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define READ_TIMEOUT_S 30
#define MAX_REPLY_BYTES (1 << 22)
#define IDLE_AFTER_REPLY_US 300000

static clef_server *server;

static void stop_server(void) {
    clef_server_free(server);
    server = NULL;
}

static void quiet_log(clef_log_level level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

static void start_server(void) {
    signal(SIGPIPE, SIG_IGN);
    clef_log_set(quiet_log, NULL);
    clef_server_params p = clef_server_default_params();
    /* the replay runs from the repository root; a campaign may run elsewhere and name it */
    const char *release = getenv("CLEF_FUZZ_HTTP_RELEASE");
    p.model_dir = release ? release : "demo/clef-demo";
    p.served_name = "clef-flash";
    p.token = "fuzz";
    p.n_threads = 1;
    p.max_length = 1024;
    p.max_body_bytes = 1 << 16;
    p.client_timeout_s = 5;
    p.access_log = 0;
    CLEF_ASSERT(clef_server_start(&p, &server) == CLEF_OK);
    for (int i = 0; i < 6000 && clef_server_get_state(server) == CLEF_SERVER_LOADING; i++) {
        struct timespec ms10 = {0, 10 * 1000 * 1000};
        nanosleep(&ms10, NULL);
    }
    if (clef_server_get_state(server) != CLEF_SERVER_READY) {
        fprintf(stderr, "fuzz_http: the server did not load '%s': %s\n", p.model_dir,
                clef_server_error(server));
        abort();
    }
    atexit(stop_server);
}

/* Walk the responses in reply[0..n): check each status and JSON body. */
static void check_replies(const char *reply, size_t n) {
    size_t at = 0;
    while (at + 12 <= n && (memcmp(reply + at, "HTTP/1.1 ", 9) == 0 ||
                            memcmp(reply + at, "HTTP/1.0 ", 9) == 0)) {
        int status = atoi(reply + at + 9);
        if (status >= 500 && status != 505) {
            fprintf(stderr, "fuzz_http: status %d:\n%.*s\n", status, (int)(n - at > 2000 ? 2000 : n - at),
                    reply + at);
            abort();
        }
        const char *end = NULL;
        for (size_t i = at; i + 3 < n; i++)
            if (memcmp(reply + i, "\r\n\r\n", 4) == 0) {
                end = reply + i + 4;
                break;
            }
        if (!end)
            return;
        size_t length = 0;
        int json = 0, have_length = 0;
        for (const char *line = reply + at; line < end;) {
            const char *eol = memchr(line, '\n', (size_t)(end - line));
            if (!eol)
                break;
            if (strncasecmp(line, "Content-Length:", 15) == 0) {
                length = strtoul(line + 15, NULL, 10);
                have_length = 1;
            }
            if (strncasecmp(line, "Content-Type: application/json", 30) == 0)
                json = 1;
            line = eol + 1;
        }
        if (!have_length || (size_t)(end - reply) + length > n)
            return;
        if (json && length) {
            json_doc *doc = NULL;
            CLEF_ASSERT(json_parse(end, length, NULL, &doc, NULL) == 0);
            json_doc_free(doc);
        }
        at = (size_t)(end - reply) + length;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!server)
        start_server();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CLEF_ASSERT(fd >= 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons(clef_server_port(server));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {READ_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    CLEF_ASSERT(connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    size_t sent = 0;
    while (sent < size) {
        ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server closed early (e.g. after a 413 or a malformed request) */
        sent += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char *reply = malloc(MAX_REPLY_BYTES);
    CLEF_ASSERT(reply);
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(fd, reply + n, MAX_REPLY_BYTES - n, 0);
        if (r == 0)
            break;
        if (r < 0) {
            /* a reset after an early reply is fine; silence before any answer is a hang */
            CLEF_ASSERT(n > 0 || (errno != EAGAIN && errno != EWOULDBLOCK));
            break;
        }
        if (n == 0) {
            /* once answers flow, a pause ends the exchange: a half-closed keep-alive
             * connection is otherwise only closed by the server's idle timeout */
            struct timeval idle = {0, IDLE_AFTER_REPLY_US};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
        }
        n += (size_t)r;
        if (n == MAX_REPLY_BYTES)
            break;
    }
    close(fd);
    check_replies(reply, n);
    free(reply);
    return 0;
}
