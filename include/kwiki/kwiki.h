/* kwiki.h: the C API of libkwiki. JSON in, JSON out, opaque handles, explicit free.
 *
 * Every function returns a status: 0 success; 1 a valid request with nothing found; 2 bad input
 * or usage; 3 not recorded (an exact hardware fact kwiki does not have); 4 runtime failure.
 * On success *out is a JSON document; on failure it is {"error": {"code", "number", "message",
 * "file", "pointer"}}. Free every returned string with kwiki_free. `out` (and `error`) may be
 * NULL when only the status is wanted. A request member of the wrong JSON type, a negative or
 * out-of-range number, or JSON nested deeper than 64 levels is status 2 with one line saying
 * which member. Handles are not thread-safe: use one per thread. No function throws or aborts
 * on bad input. */
#ifndef KWIKI_KWIKI_H
#define KWIKI_KWIKI_H

#ifdef __cplusplus
extern "C" {
#endif

/** An open index (one generation, a query engine over it). */
typedef struct kwiki_engine kwiki_engine;

/** Status codes (the CLI's exit codes). */
enum {
  KWIKI_OK = 0,
  KWIKI_NOTHING_FOUND = 1,
  KWIKI_BAD_INPUT = 2,
  KWIKI_NOT_RECORDED = 3,
  KWIKI_RUNTIME_ERROR = 4
};

/** libkwiki's version, e.g. "0.1.0". Static storage: do not free. */
const char* kwiki_version(void);

/** Builds or refreshes an index. request: {"wiki": [dirs], "internal": [dirs], "index": dir,
 *  "check": bool, "strict": bool, "force": bool, "shards": n}; "wiki" defaults to the bundled
 *  gpu-wiki. The answer is kwiki index --json's: mode, index, generation, rebuilt, unchanged,
 *  files, records, warnings, by_store, seconds; with "shards" >= 2 the shard folders under
 *  "shards". */
int kwiki_index(const char* request_json, char** out);

/** Opens index_dir (NULL: $KWIKI_INDEX or ~/.cache/kwiki/index, built from the bundled
 *  gpu-wiki when missing). On failure *engine is NULL and *error holds the error JSON. */
int kwiki_open(const char* index_dir, kwiki_engine** engine, char** error);

/** As kwiki_open, but the full text comes from shards: "HOST:PORT,HOST:PORT" (xapian-tcpsrv),
 *  shard folders or a Xapian stub file, every shard of index_dir's generation once. */
int kwiki_open_shards(const char* index_dir, const char* shards, kwiki_engine** engine, char** error);

/** Answers {"text": "...", "brief": bool, "max_bytes": n, "max_records": n, "sources": bool,
 *  "explain": bool, "intent": {upstream 8-slot intent}} in the answer contract's shape (as
 *  kwiki query: "brief" the brief form, 8 records by default; "max_bytes" spent on facts, then
 *  brief records, then longer fields; "max_records" 0 = the default). Status 1 when nothing is
 *  found or the corpus does not cover the request (the notes say so). */
int kwiki_query(kwiki_engine* engine, const char* request_json, char** out);

/** Exact hardware facts: {"product": "H200", "field": "memory.bandwidth_tb_s", "vs": "H20",
 *  "brief": bool (spec sheets in the brief form), "sources": bool (default true)}. */
int kwiki_hardware(kwiki_engine* engine, const char* request_json, char** out);

/** Records by id: {"ids": ["..."]}, in the order asked, a repeated id served once (the notes
 *  name it and unknown ids). Payloads are the stored bytes. Status 1 when none is known. */
int kwiki_get(kwiki_engine* engine, const char* request_json, char** out);

/** Plans a task: {"task": path, "gpu": product, "workspace": dir, "pattern": name,
 *  "shapes": [ids], "force": bool, "dry_run": bool, "with_plan": bool}. The answer is the plan's
 *  account (kwiki plan --json): family, confidence, proof, SOL per shape, cited ids, notes; with
 *  "with_plan" also the whole plans/v0_plan.json under "v0_plan". */
int kwiki_plan(kwiki_engine* engine, const char* request_json, char** out);

/** Utilization: {"gpu", "dtype", "flops", "bytes", "time_ms", "grid_blocks", "unit"}. */
int kwiki_util(kwiki_engine* engine, const char* request_json, char** out);

/** Records feedback: {"query_id", "id", "outcome": "served|applied|effective|ineffective"}. */
int kwiki_feedback(kwiki_engine* engine, const char* request_json, char** out);

/** Frees a string returned by this API (NULL is fine). */
void kwiki_free(char* text);

/** Closes an engine (NULL is fine). */
void kwiki_close(kwiki_engine* engine);

#ifdef __cplusplus
}
#endif

#endif /* KWIKI_KWIKI_H */
