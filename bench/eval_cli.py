#!/usr/bin/env python3
"""nDCG@10 and Recall@8 of any kwiki binary through its CLI (the formulas of bench/eval_queries),
to 4 decimals, and Recall@8 of the ids a --brief --max-bytes 4096 answer holds: compares binaries
built from different commits on one index.
Usage: bench/eval_cli.py KWIKI INDEX [QUERIES.jsonl]"""
import json
import math
import os
import subprocess
import sys


def dcg(ranked, rel, k):
    return sum((2 ** rel[x] - 1) / math.log2(i + 2) for i, x in enumerate(ranked[:k]) if x in rel)


def ndcg(ranked, rel, k):
    grades = sorted(rel.values(), reverse=True)[:k]
    ideal = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(grades))
    return dcg(ranked, rel, k) / ideal if ideal else 0


def recall(ranked, rel, k):
    return sum(1 for x in ranked[:k] if x in rel) / min(len(rel), k) if rel else 0


def ids(kwiki, index, text, flags):
    out = subprocess.run([kwiki, "query", text, "--index", index, "--json"] + flags, capture_output=True, text=True).stdout
    return list(json.loads(out)["records"].keys())


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    kwiki, index = sys.argv[1:3]
    queries = sys.argv[3] if len(sys.argv) == 4 else os.path.join(os.path.dirname(__file__), "..", "data", "eval", "queries.jsonl")
    n = nd = rc = rb = 0
    for line in open(queries):
        q = json.loads(line)
        ranked = ids(kwiki, index, q["query"], ["--max-records", "10"])
        brief = ids(kwiki, index, q["query"], ["--brief", "--max-bytes", "4096"])
        nd += ndcg(ranked, q["relevant"], 10)
        rc += recall(ranked, q["relevant"], 8)
        rb += recall(brief, q["relevant"], 8)
        n += 1
    print("%s: %d requests, nDCG@10 %.4f  Recall@8 %.4f  R@8/4KB %.4f" % (kwiki, n, nd / n, rc / n, rb / n))


if __name__ == "__main__":
    main()
