# harness_result_json_test.py: the harness's RESULT_JSON line is strict JSON even when a case's
# error is infinite (an output held NaN where the reference did not), so kwiki can parse it.
# Usage: python3 tests/harness_result_json_test.py BASELINE_HARNESS_DIR
import json
import math
import sys

sys.path.insert(0, sys.argv[1])
import test_kernel  # noqa: E402  (imports no torch at module level)

result = {"max_abs_err": float("inf"), "max_rel_err": float("nan"), "ok": 1.5, "n": 3, "flag": True,
          "cases": [{"err": float("-inf")}, {"err": 0.25}], "pair": (float("inf"), 2.0), "none": None}
clean = test_kernel.strict_json(result)
line = json.dumps(clean, allow_nan=False)  # raises ValueError if a non-finite float is left
back = json.loads(line)
assert back["max_abs_err"] is None and back["max_rel_err"] is None, back
assert back["ok"] == 1.5 and back["n"] == 3 and back["flag"] is True and back["none"] is None, back
assert back["cases"] == [{"err": None}, {"err": 0.25}], back
assert back["pair"] == [None, 2.0], back
assert not any(isinstance(v, float) and not math.isfinite(v) for v in back.values())
print("strict RESULT_JSON: ok")
