/* Uses libkwiki's C API from plain C: open, query, hardware, errors, free. */
#include <stdio.h>
#include <string.h>

#include "kwiki/kwiki.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: consumer_c INDEX_DIR\n");
    return 2;
  }
  kwiki_engine* engine = NULL;
  char* error = NULL;
  if (kwiki_open(argv[1], &engine, &error) != KWIKI_OK) {
    fprintf(stderr, "open failed: %s\n", error);
    kwiki_free(error);
    return 4;
  }
  char* out = NULL;
  int status = kwiki_query(engine, "{\"text\": \"paged decode attention GQA on H200\", \"max_records\": 2}", &out);
  printf("query %d %.80s\n", status, out);
  int ok = status == KWIKI_OK && strstr(out, "\"records\"") != NULL;
  kwiki_free(out);
  status = kwiki_hardware(engine, "{\"product\": \"RTX 4090\"}", &out);
  printf("unrecorded %d\n", status);
  ok = ok && status == KWIKI_NOT_RECORDED;
  kwiki_free(out);
  status = kwiki_get(engine, "[1, 2]", &out);
  printf("bad request %d %.60s\n", status, out);
  ok = ok && status == KWIKI_BAD_INPUT && strstr(out, "\"error\"") != NULL;
  kwiki_free(out);
  kwiki_close(engine);
  printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
