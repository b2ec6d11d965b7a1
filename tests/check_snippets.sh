#!/usr/bin/env bash
# Compiles every CUDA and HIP code example in a gpu-wiki: technique, doc and other kernel records
# (payload.implementation.snippet) and hardware records (facts.example.snippet). CUDA examples
# build with nvcc for sm_90a, HIP examples with clang++-19 for gfx942 (Debian's HIP headers and
# device libraries, as tests/check_templates_hip.sh does). Shell, Python and CuTe/CUTLASS examples
# are listed and not compiled (no CUTLASS headers here). Two compilers run at a time.
# Usage: tests/check_snippets.sh WIKI_DIR OUT_DIR [MIN_COMPILED]
# Exit: 0 all compiled (and at least MIN_COMPILED of them), 1 a snippet failed or too few,
#       77 skipped: nvcc or clang-19 / HIP headers / ROCm device libraries missing.
set -uo pipefail
wiki=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
min=${3:-0}
jobs=${KWIKI_SNIPPET_JOBS:-2}

nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
clang=$(command -v clang++-19 || true)
llvm_as=$(command -v llvm-as-19 || true)
bitcode=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
missing=()
[[ -z $nvcc ]] && missing+=("nvcc (CUDA toolkit)")
if [[ -z $clang || -z $llvm_as || ! -f $bitcode/ockl.bc || ! -f /usr/include/hip/hip_runtime.h ]]; then
  missing+=("clang-19, llvm-19, libamdhip64-dev and rocm-device-libs (scripts/dev.sh deps installs them)")
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  printf 'SKIPPED: the snippet check needs %s\n' "${missing[@]}"
  exit 77
fi

# One source file per example, named after the record id; a manifest says which compiler.
rm -rf "$out/src" "$out/log"
mkdir -p "$out/src" "$out/log"
python3 - "$wiki" "$out/src" > "$out/manifest.txt" <<'EOF' || { echo "FAIL: could not extract the snippets"; exit 1; }
import json, pathlib, re, sys
wiki, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
cpp = re.compile(r'^\s*#\s*include\b|__global__|__device__', re.M)
include = re.compile(r'^\s*#\s*include\s*<([^>]+)>', re.M)
# Headers a snippet may need beyond the compilers' own (HIP 5.2 on Debian lacks ROCm 6's hip_bf16.h).
# CUDA 13 keeps CUB/Thrust/libcu++ under include/cccl, which nvcc adds to its search path.
search_dirs = [pathlib.Path(p) for p in ('/usr/include', '/usr/local/cuda/include', '/usr/local/cuda/include/cccl',
                                        '/usr/local/cuda/targets/x86_64-linux/include', '/usr/local/cuda/targets/x86_64-linux/include/cccl')]
def absent_header(text):
    for h in include.findall(text):
        if '/' in h and (h.startswith('hip/') or h.startswith('cuda/') or h.startswith('cub/') or h.startswith('cooperative_groups/')):
            if not any((d / h).exists() for d in search_dirs):
                return h
    return None
hip_marks = re.compile(r'hip/hip_runtime|__builtin_amdgcn_|hipLaunch|hipMalloc')
rows = []
for path in sorted(wiki.glob('*_wiki/records/**/*.json')):
    doc = json.loads(path.read_text(encoding='utf-8'))
    rid = doc.get('id', path.stem)
    if doc.get('schema') == 'hw-1.0':
        ex = doc.get('facts', {}).get('example')
        if not isinstance(ex, dict) or not ex.get('snippet'):
            continue
        lang, text = ex['language'], ex['snippet']
    else:
        impl = doc.get('payload', {}).get('implementation') or {}
        text = impl.get('snippet', '')
        if not text:
            continue
        dsl = doc['retrieval']['scope'].get('dsl', 'any')
        if not cpp.search(text):
            rows.append((rid, 'none', 'not C++ (shell, Python or prose)'))
            continue
        if dsl in ('cute', 'cutlass', 'ck'):
            rows.append((rid, 'none', dsl + ' example: needs that library\'s headers'))
            continue
        lang = 'hip' if dsl == 'hip' or hip_marks.search(text) else 'cuda'
    missing_header = absent_header(text)
    if missing_header:
        rows.append((rid, 'none', 'needs <' + missing_header + '>, which this machine\'s ' + lang.upper() + ' headers lack'))
        continue
    suffix = '.cu' if lang == 'cuda' else '.hip'
    (dest / (rid + suffix)).write_text(text if text.endswith('\n') else text + '\n', encoding='utf-8')
    rows.append((rid, lang, str(dest / (rid + suffix))))
for r in rows:
    print('\t'.join(r))
EOF

# The ROCm root clang wants: Debian's device libraries plus the gfx942 ISA-version bitcode they lack.
root="$out/rocm-root"
mkdir -p "$root/amdgcn/bitcode"
for f in "$bitcode"/*.bc; do ln -sf "$f" "$root/amdgcn/bitcode/"; done
ln -sfn /usr/include "$root/include"
if [[ ! -f $bitcode/oclc_isa_version_942.bc ]]; then
  printf 'target triple = "amdgcn-amd-amdhsa"\n@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 9402, align 4\n' > "$root/isa_942.ll"
  rm -f "$root/amdgcn/bitcode/oclc_isa_version_942.bc"
  "$llvm_as" "$root/isa_942.ll" -o "$root/amdgcn/bitcode/oclc_isa_version_942.bc"
fi

compile_one() {  # id lang file
  local id=$1 lang=$2 file=$3 log="$out/log/$1.log"
  if [[ $lang == cuda ]]; then
    "$nvcc" -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -c -o "$out/log/$id.o" "$file" > "$log" 2>&1
  else
    "$clang" -x hip --offload-arch=gfx942:sramecc+:xnack- --rocm-path="$root" -std=c++17 -O2 -c \
      -o "$out/log/$id.o" "$file" > "$log" 2>&1
  fi
  local rc=$?
  if [[ $rc -eq 0 ]]; then echo "ok   $lang $id"; else echo "FAIL $lang $id"; fi
  return 0
}
export -f compile_one
export out nvcc clang root

awk -F'\t' '$2 != "none" {print $1"\t"$2"\t"$3}' "$out/manifest.txt" |
  tr '\t' '\n' | xargs -d '\n' -n 3 -P "$jobs" bash -c 'compile_one "$0" "$1" "$2"' > "$out/results.txt"
sort -k3 "$out/results.txt"
while IFS=$'\t' read -r id lang why; do
  [[ $lang == none ]] && echo "not compiled: $id ($why)"
done < "$out/manifest.txt"

fail=0
while read -r verdict lang id; do
  [[ $verdict == FAIL ]] || continue
  echo "---- $id ($lang) ----"
  head -30 "$out/log/$id.log"
  fail=1
done < "$out/results.txt"
ok_cuda=$(grep -c '^ok   cuda' "$out/results.txt")
ok_hip=$(grep -c '^ok   hip' "$out/results.txt")
failed=$(grep -c '^FAIL' "$out/results.txt")
listed=$(awk -F'\t' '$2 == "none"' "$out/manifest.txt" | wc -l)
echo "snippets: $((ok_cuda + ok_hip)) compiled ($ok_cuda CUDA for sm_90a, $ok_hip HIP for gfx942), $failed failed, $listed not C++ or library-bound (listed, not compiled)"
if [[ $((ok_cuda + ok_hip)) -lt $min ]]; then
  echo "FAIL: fewer than $min examples compiled"
  fail=1
fi
exit $fail
