"""The math-verify worker process (run as a script, so it imports neither torch nor ablate).

Protocol: one JSON request per stdin line, `{"gold": str, "pred": str, "seconds": float}`; one
JSON reply per stdout line, `{"equal": bool}`, `{"timeout": true}` or `{"error": str}`. Running
here, math-verify is in its process's main thread, so its own signal-based timeouts work; the
parent kills this process if even those do not fire in time (sympy stuck in C code).
"""

import json
import math
import sys


def judge(parse, verify, timeout_exception, request: dict) -> dict:
    seconds = max(1, math.ceil(float(request["seconds"])))
    try:
        gold = parse(
            "\\boxed{" + request["gold"] + "}", parsing_timeout=seconds, raise_on_error=True
        )
        if not gold:
            return {"error": "math-verify could not parse the reference answer"}
        pred = parse(
            "\\boxed{" + request["pred"] + "}", parsing_timeout=seconds, raise_on_error=True
        )
        equal = bool(pred) and verify(gold, pred, timeout_seconds=seconds, raise_on_error=True)
        return {"equal": bool(equal)}
    except timeout_exception:
        return {"timeout": True}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> None:
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        reply = judge(parse, verify, TimeoutException, json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
