"""Calling libkwiki from Python with ctypes: open an index, ask a question, read a hardware fact.

Usage: python3 kwiki_ctypes.py LIBKWIKI_SO INDEX_DIR
"""
import ctypes
import json
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.kwiki_version.restype = ctypes.c_char_p
lib.kwiki_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
for name in ("kwiki_query", "kwiki_hardware", "kwiki_get"):
    getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
lib.kwiki_free.argtypes = [ctypes.c_void_p]
lib.kwiki_close.argtypes = [ctypes.c_void_p]


def take(ptr):
    """Copies a string kwiki returned, then frees it (every returned string must be freed)."""
    text = ctypes.cast(ptr, ctypes.c_char_p).value.decode()
    lib.kwiki_free(ptr)
    return json.loads(text)


engine, error = ctypes.c_void_p(), ctypes.c_void_p()
status = lib.kwiki_open(sys.argv[2].encode(), ctypes.byref(engine), ctypes.byref(error))
if status != 0:
    sys.exit("kwiki_open failed: %s" % take(error))

out = ctypes.c_void_p()
status = lib.kwiki_query(engine, json.dumps({"text": "fused add rmsnorm on H200", "brief": True, "max_records": 3}).encode(), ctypes.byref(out))
answer = take(out)
print("query status", status, "->", list(answer["records"]))

status = lib.kwiki_hardware(engine, json.dumps({"product": "H200", "field": "memory.bandwidth_tb_s"}).encode(), ctypes.byref(out))
fact = take(out)["hardware"][0]
print("hardware status", status, "->", fact["value"], fact["unit"], fact["provenance"]["citation"])

status = lib.kwiki_query(engine, b"not json", ctypes.byref(out))
print("bad request status", status, "->", take(out)["error"]["code"])
lib.kwiki_close(engine)
print("libkwiki", lib.kwiki_version().decode())
