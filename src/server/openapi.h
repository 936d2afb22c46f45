/*
 * openapi.h — the OpenAPI 3.0 description of `clef serve` served at GET /openapi.json: every
 * route, its request body (the api.md record with its limits), its answers and error shapes.
 * Property-based testers (schemathesis) generate requests from it; keep it true to server.c.
 */
#ifndef CLEF_SERVER_OPENAPI_H
#define CLEF_SERVER_OPENAPI_H

/* The document as JSON text (static, NUL-terminated). */
const char *server_openapi_json(void);

#endif /* CLEF_SERVER_OPENAPI_H */
