#!/usr/bin/env python3
"""Answer sizes of a kwiki binary: bytes / records / facts of five requests under the answer forms
and byte budgets of issue 22, as a Markdown table (any kwiki binary: compare old and new).
Usage: bench/answer_sizes.py KWIKI INDEX"""
import json
import subprocess
import sys

REQUESTS = [
    ("README RMSNorm", "my bf16 rmsnorm on H200 only reaches 70% of DRAM bandwidth"),
    ("decode attention on MI300X", "decode attention with GQA on MI300X, batch 1, how do I split the KV?"),
    ("README spills", "ptxas says 256 bytes spill stores in my sm_90a GEMM epilogue"),
    ("H20 bf16 peak and bandwidth", "what is the bf16 dense peak and memory bandwidth of H20"),
    ("H200 facts + RMSNorm", "H200 memory bandwidth and bf16 dense peak: my rmsnorm kernel only reaches 70% of DRAM bandwidth"),
]
FLAGS = [[], ["--brief"], ["--brief", "--max-bytes", "4000"], ["--max-bytes", "2000"], ["--max-bytes", "3000"], ["--max-bytes", "5000"]]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    kwiki, index = sys.argv[1:]
    print("| request | " + " | ".join(" ".join(f) or "default" for f in FLAGS) + " |")
    print("| --- " * (len(FLAGS) + 1) + "|")
    for label, request in REQUESTS:
        cells = []
        for flags in FLAGS:
            out = subprocess.run([kwiki, "query", request, "--index", index, "--json"] + flags, capture_output=True, text=True).stdout
            answer = json.loads(out)
            cells.append("%d / %d / %d" % (len(out), len(answer["records"]), len(answer.get("hardware", []))))
        print("| %s | %s |" % (label, " | ".join(cells)))


if __name__ == "__main__":
    main()
