# `kernelgate problems --check`: load each problem as the harness does, on the CPU.
# argv[1]: a JSON file holding [[key, path], ...]. One JSON line per problem on stdout.
import gc
import importlib.util
import json
import sys
import traceback


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


try:
    import torch
except ModuleNotFoundError as e:
    emit({"fatal": "no_torch", "python": sys.executable, "error": str(e)})
    sys.exit(0)

# Starting Python and importing torch is not a problem's time: each problem's limit starts here.
emit({"ready": True})


def describe(x):
    if isinstance(x, torch.Tensor):
        return "%s%s" % (str(x.dtype).replace("torch.", ""), list(x.shape))
    if isinstance(x, (int, float, bool, str)) or x is None:
        return repr(x)
    if isinstance(x, (list, tuple)):
        return "%s(%d)" % (type(x).__name__, len(x))
    return type(x).__name__


jobs = json.load(open(sys.argv[1]))
for i, (key, path) in enumerate(jobs):
    out = {"key": key}
    phase = "import"
    try:
        spec = importlib.util.spec_from_file_location("kg_check_problem_%d" % i, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        phase = "get_init_inputs()"
        init = mod.get_init_inputs()
        phase = "Model(*get_init_inputs())"
        torch.manual_seed(42)
        model = mod.Model(*init)
        phase = "get_inputs()"
        try:
            # Shapes without allocating (level-1 inputs reach gigabytes).
            with torch.device("meta"):
                inputs = mod.get_inputs()
        except Exception:
            inputs = mod.get_inputs()
        out["inputs"] = [describe(x) for x in inputs]
        out["ok"] = True
        del model, inputs
    except ModuleNotFoundError as e:
        out["phase"] = phase
        out["missing"] = (e.name or "").split(".")[0]
        out["error"] = "%s: ModuleNotFoundError: %s" % (phase, e)
    except BaseException as e:  # SystemExit from a problem too
        if isinstance(e, KeyboardInterrupt):
            raise
        out["phase"] = phase
        out["error"] = "%s: %s: %s" % (phase, type(e).__name__, e)
        tb = traceback.format_exc().strip().splitlines()
        out["traceback"] = "\n".join(tb[-6:])
    emit(out)
    gc.collect()
