#!/usr/bin/env python3
"""Install the GitHub-only Hugging Face `deepseek_v41` model files as an overlay package, and
activate them on top of a PyPI transformers release.

The DeepSeek-V4.1 reference (`DeepseekV41ForCausalLM`) lives only in the transformers GitHub
repository (`src/transformers/models/deepseek_v41/`); no PyPI release ships it (5.23.0 to 5.25.0
checked). hippo never commits those files. A developer downloads them (see
`scripts/reference/README.md`) and this tool:

  install  --src DIR --dest OVERLAY
      1. checks that DIR holds the three files the text model needs (`__init__.py`,
         `configuration_deepseek_v41.py`, `modeling_deepseek_v41.py`) and compares their sha256 with
         the pinned upstream commit below (a mismatch is an error unless --allow-unpinned);
      2. copies them, unmodified, to OVERLAY/deepseek_v41/ (an existing OVERLAY/deepseek_v41 is
         replaced) and writes OVERLAY/MANIFEST.json (commit, sha256 of every file).
      Nothing else is written: no site-packages file, no .pth, no edit of transformers.

  check    --dest OVERLAY
      activates the overlay in this interpreter and runs a 16-token forward of a 3-layer random model.

Activation (`activate(OVERLAY)`, used by `scripts/gen_model_golden.py`) happens only in the process
that calls it, in memory, and prints one line per change it makes (the "shim" below):

  A. appends OVERLAY to `transformers.models.__path__`, so `import transformers.models.deepseek_v41`
     finds the overlay package (refused if the installed transformers already ships the model);
  B. wraps `transformers.cache_utils.get_layer_types_and_kwargs` so that `DynamicCache(config=...)`
     passes `config=` to the `shared_compressed_attention` cache layer (`DeepseekV41CSACache`).
     transformers' GitHub core does this; PyPI 5.23.0 only does it for V4's two layer types and
     otherwise fails with "DeepseekV41CSACache.__init__() missing 1 required positional argument";
  C. registers the config and model classes with AutoConfig / AutoModel / AutoModelForCausalLM
     (the GitHub core lists them in models/auto/; PyPI does not), so Auto* and AutoTokenizer work on a
     checkpoint directory whose config.json says `model_type: deepseek_v41`.

Everything in this file is hippo's own code; the only third-party code is what the user supplies
in --src.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

# The upstream files this recipe was developed and tested against: transformers GitHub commit
# 0a2080b43eb64e6d448186a4f3f0bc9c618f4797 (modeling_deepseek_v41.py generated from
# modular_deepseek_v41.py at that commit; the text model only, no vision modules yet), and
# __init__.py as of 34890d8dd52aed77d8faefc1825c5f204cc59591 (identical lazy-module boilerplate).
UPSTREAM_COMMIT = "0a2080b43eb64e6d448186a4f3f0bc9c618f4797"
UPSTREAM_PATH = "src/transformers/models/deepseek_v41"
PINNED_SHA256 = {
    "__init__.py": "f06a66958e90ba22db3155059d0974a567fae726d9e59f21be0e12c9c37fb3c0",
    "configuration_deepseek_v41.py": "c9a2a19da6caf600c8b5705d97ccd341a37e9718eef78763dd4611031877eb67",
    "modeling_deepseek_v41.py": "b06cef1007cba028030ee3914fa955b1d237c5d9c8498582b2be9e7877099f92",
}
# Versions the recipe was tested with (scripts/reference/README.md pins the full environment).
TESTED_TRANSFORMERS = "5.23.0"
TESTED_TORCH = "2.15.0"

PACKAGE = "deepseek_v41"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_urls(commit: str = UPSTREAM_COMMIT) -> list[str]:
    return [f"https://raw.githubusercontent.com/huggingface/transformers/{commit}/{UPSTREAM_PATH}/{name}"
            for name in PINNED_SHA256]


# --------------------------------------------------------------------------------------------
# install / check (command line)
# --------------------------------------------------------------------------------------------

def install(src: Path, dest: Path, allow_unpinned: bool) -> None:
    missing = [name for name in PINNED_SHA256 if not (src / name).is_file()]
    if missing:
        sys.exit(f"assemble_reference: {src} lacks {', '.join(missing)}; download them from\n  "
                 + "\n  ".join(raw_urls()))
    digests = {name: _sha256(src / name) for name in PINNED_SHA256}
    mismatched = [name for name, digest in digests.items() if digest != PINNED_SHA256[name]]
    if mismatched:
        lines = [f"  {name}: sha256 {digests[name]}, pinned {PINNED_SHA256[name]}" for name in mismatched]
        message = ("assemble_reference: these files differ from upstream commit "
                   f"{UPSTREAM_COMMIT}:\n" + "\n".join(lines))
        if not allow_unpinned:
            sys.exit(message + "\n(--allow-unpinned installs them anyway; record the difference "
                     "in docs/reference-model.md before committing golden data made with them)")
        print(message + "\n  installing anyway (--allow-unpinned)", file=sys.stderr)
    package_dir = dest / PACKAGE
    if package_dir.exists():
        shutil.rmtree(package_dir)
    package_dir.mkdir(parents=True)
    for name in PINNED_SHA256:
        shutil.copyfile(src / name, package_dir / name)
    manifest = {
        "upstream": "github.com/huggingface/transformers",
        "upstream_path": UPSTREAM_PATH,
        "pinned_commit": UPSTREAM_COMMIT,
        "files": digests,
        "pinned": not mismatched,
        "tested_with": {"transformers": TESTED_TRANSFORMERS, "torch": TESTED_TORCH},
    }
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"assemble_reference: installed {len(digests)} files into {package_dir} "
          f"({'pinned' if not mismatched else 'NOT pinned'} commit {UPSTREAM_COMMIT[:12]})")
    print(f"  activate with: import assemble_reference; assemble_reference.activate('{dest}')")


def check(dest: Path) -> None:
    info = activate(dest)
    import torch
    from transformers.models.deepseek_v41 import DeepseekV41Config, DeepseekV41ForCausalLM

    torch.manual_seed(0)
    config = DeepseekV41Config(text_config=dict(
        vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, head_dim=64,
        qk_rope_head_dim=16, q_lora_rank=32, o_groups=2, o_lora_rank=16, sliding_window=8,
        compress_ratios=[0, 2, 1], index_n_heads=8, index_head_dim=32, index_topk=4,
        candidate_topk_blocks=2, candidate_block_size=4, n_routed_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, num_nextn_predict_layers=0,
        rope_scaling={"rope_type": "yarn", "factor": 16, "beta_fast": 32, "beta_slow": 1,
                      "original_max_position_embeddings": 65536}))
    model = DeepseekV41ForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 16))
    with torch.no_grad():
        logits = model(ids).logits
    print(f"assemble_reference: check ok: transformers {info['transformers']}, torch {info['torch']}, "
          f"overlay {info['module_file']}, logits {tuple(logits.shape)}")


# --------------------------------------------------------------------------------------------
# activation shim (hippo's code; applied in memory, in the calling process only)
# --------------------------------------------------------------------------------------------

_ACTIVATED: dict | None = None


def activate(dest: str | Path, quiet: bool = False) -> dict:
    """Make `transformers.models.deepseek_v41` importable from the overlay at `dest` and apply the
    compatibility shim (A, B, C in the module docstring). Idempotent. Returns a description of what
    is in effect (versions, overlay manifest, the shim steps applied)."""
    global _ACTIVATED
    if _ACTIVATED is not None:
        return _ACTIVATED
    dest = Path(dest).resolve()
    say = (lambda *_: None) if quiet else (lambda msg: print(f"reference shim: {msg}", file=sys.stderr))
    manifest_path = dest / "MANIFEST.json"
    if not (dest / PACKAGE / "modeling_deepseek_v41.py").is_file() or not manifest_path.is_file():
        raise SystemExit(f"reference shim: no overlay at {dest}; run "
                         "scripts/reference/assemble_reference.py install --src DIR --dest "
                         f"{dest} first (see scripts/reference/README.md)")
    manifest = json.loads(manifest_path.read_text())
    for name, digest in manifest["files"].items():
        if _sha256(dest / PACKAGE / name) != digest:
            raise SystemExit(f"reference shim: {dest / PACKAGE / name} changed since install "
                             "(sha256 differs from MANIFEST.json); reinstall it")

    import importlib.util

    import torch
    import transformers
    import transformers.models

    steps = []
    # A. overlay package path
    installed = Path(transformers.__file__).parent / "models" / PACKAGE
    if installed.exists():
        raise SystemExit(f"reference shim: transformers {transformers.__version__} ships {installed}; "
                         "the overlay would be shadowed. Use that release's model instead and "
                         "update scripts/reference/README.md")
    if str(dest) not in list(transformers.models.__path__):
        transformers.models.__path__.append(str(dest))
    steps.append(f"A: transformers.models.__path__ += {dest}")
    say(steps[-1])
    module = importlib.import_module(f"transformers.models.{PACKAGE}")
    from transformers.models.deepseek_v41 import modeling_deepseek_v41 as modeling
    module_file = str(Path(modeling.__file__).resolve())
    if not module_file.startswith(str(dest)):
        raise SystemExit(f"reference shim: imported {module_file}, not the overlay in {dest}")

    # B. cache-layer dispatch for `shared_compressed_attention`
    import transformers.cache_utils as cache_utils

    probe_config = module.DeepseekV41TextConfig(
        num_hidden_layers=3, compress_ratios=[0, 2, 1], num_nextn_predict_layers=0,
        hidden_size=32, head_dim=64, qk_rope_head_dim=16, q_lora_rank=32, num_attention_heads=2,
        o_groups=2, o_lora_rank=16, n_routed_experts=2, num_experts_per_tok=1)
    _, probe_kwargs = cache_utils.get_layer_types_and_kwargs(probe_config)
    if "config" in probe_kwargs[1]:
        steps.append("B: not needed (this transformers passes config= to shared_compressed_attention)")
    elif not getattr(cache_utils.get_layer_types_and_kwargs, "_hippo_shim", False):
        original = cache_utils.get_layer_types_and_kwargs

        def get_layer_types_and_kwargs(config):
            layer_types, per_layer_kwargs = original(config)
            layer_configs = config.per_layer_config
            for i, layer_type in enumerate(layer_types):
                if layer_type == "shared_compressed_attention":
                    per_layer_kwargs[i] = dict(per_layer_kwargs[i], config=layer_configs[i])
            return layer_types, per_layer_kwargs

        get_layer_types_and_kwargs._hippo_shim = True
        cache_utils.get_layer_types_and_kwargs = get_layer_types_and_kwargs
        steps.append("B: cache_utils.get_layer_types_and_kwargs passes config= to "
                     "shared_compressed_attention cache layers")
    say(steps[-1])
    from transformers import DynamicCache

    probe_cache = DynamicCache(config=probe_config)
    if type(probe_cache.layers[1]).__name__ != "DeepseekV41CSACache":
        raise SystemExit("reference shim: DynamicCache does not build DeepseekV41CSACache layers")

    # C. Auto* registration
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    for model_type, config_class in (("deepseek_v41", module.DeepseekV41Config),
                                     ("deepseek_v41_text", module.DeepseekV41TextConfig),
                                     ("deepseek_v41_vision", module.DeepseekV41VisionConfig)):
        try:
            AutoConfig.register(model_type, config_class)
        except ValueError:
            pass  # already registered (e.g. a transformers that knows the type)
    for auto, config_class, model_class in (
            (AutoModelForCausalLM, module.DeepseekV41Config, module.DeepseekV41ForCausalLM),
            (AutoModelForCausalLM, module.DeepseekV41TextConfig, module.DeepseekV41ForCausalLM),
            (AutoModel, module.DeepseekV41TextConfig, module.DeepseekV41TextModel)):
        try:
            auto.register(config_class, model_class)
        except ValueError:
            pass
    steps.append("C: AutoConfig/AutoModel/AutoModelForCausalLM know deepseek_v41(_text)")
    say(steps[-1])

    _ACTIVATED = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "overlay": str(dest),
        "module_file": module_file,
        "manifest": manifest,
        "shim": steps,
    }
    if transformers.__version__ != TESTED_TRANSFORMERS or not torch.__version__.startswith(TESTED_TORCH):
        say(f"warning: tested with transformers {TESTED_TRANSFORMERS} and torch {TESTED_TORCH}, "
            f"running transformers {transformers.__version__} and torch {torch.__version__}")
    if not manifest.get("pinned", False):
        say(f"warning: the overlay files are not the pinned commit {UPSTREAM_COMMIT}")
    return _ACTIVATED


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="copy the upstream files into an overlay directory")
    p_install.add_argument("--src", type=Path, required=True,
                           help="directory holding the downloaded upstream files")
    p_install.add_argument("--dest", type=Path, required=True,
                           help="overlay directory (outside the repository or under .cache/)")
    p_install.add_argument("--allow-unpinned", action="store_true",
                           help="install files whose sha256 differs from the pinned commit")
    p_check = sub.add_parser("check", help="activate the overlay and run a tiny forward")
    p_check.add_argument("--dest", type=Path, required=True)
    sub.add_parser("urls", help="print the raw.githubusercontent.com URLs of the pinned files")
    args = parser.parse_args()
    if args.command == "install":
        install(args.src, args.dest, args.allow_unpinned)
    elif args.command == "check":
        check(args.dest)
    else:
        print("\n".join(raw_urls()))


if __name__ == "__main__":
    main()
