"""Checks that #include directives respect hippo's layering (docs/ARCHITECTURE.md, "Layout"):
api -> agents -> engine, storage -> kernels -> base. storage knows nothing of engine or kernels,
engine nothing of storage. Exits non-zero and names each offending line."""
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
for v in violations:
    print(v)
print(f"layering: {checked} files checked, {len(violations)} violations")
sys.exit(1 if violations or checked == 0 else 0)
