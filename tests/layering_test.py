"""Checks that #include directives respect hippo's layering (docs/ARCHITECTURE.md, "Layout"):
api -> agents -> engine, storage -> kernels -> base. storage knows nothing of engine or kernels,
engine nothing of storage; engine/model reaches kernels only through the op layer (kernels/backend.h
and what it names), never a backend's own code. Exits non-zero and names each offending line."""
import pathlib
import re
import sys

ALLOWED = {
    "base": {"base"},
    "kernels": {"base", "kernels"},
    "engine": {"base", "kernels", "engine"},
    "storage": {"base", "storage"},
    "agents": {"base", "kernels", "engine", "storage", "agents"},
    "api": {"base", "kernels", "engine", "storage", "agents", "api"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^/"]+)/')
OP_LAYER = {"kernels/backend.h", "kernels/backend_registry.h", "kernels/weight_view.h", "kernels/kv_entry_formats.h"}
HEADER = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

root = pathlib.Path(sys.argv[1])
violations = []
checked = 0
for layer, allowed in ALLOWED.items():
    for path in sorted((root / layer).rglob("*")):
        if path.suffix not in {".h", ".hpp", ".cpp", ".cu", ".cuh"}:
            continue
        checked += 1
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if m and m.group(1) in ALLOWED and m.group(1) not in allowed:
                violations.append(f"{path.relative_to(root)}:{n}: {layer}/ must not include {m.group(1)}/")
            h = HEADER.match(line)
            in_model = path.relative_to(root).parts[:2] == ("engine", "model")
            if in_model and h and h.group(1).startswith("kernels/") and h.group(1) not in OP_LAYER:
                violations.append(f"{path.relative_to(root)}:{n}: engine/model calls kernels through the op layer, not {h.group(1)}")
for v in violations:
    print(v)
print(f"layering: {checked} files checked, {len(violations)} violations")
sys.exit(1 if violations or checked == 0 else 0)
