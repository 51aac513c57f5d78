"""Named presets: variant directories that ship inside the package."""

from __future__ import annotations

from pathlib import Path

from c2v_rag.core.errors import VariantLoadError

PRESETS_DIR = Path(__file__).resolve().parents[1] / "presets"
DEFAULT_PRESET = "c2v-smollm2-135m-minilm"
# What names the default preset where a name is needed (c2v-rag eval default, bench/ood/score.py --model default).
DEFAULT_ALIAS = "default"


def list_presets() -> list[str]:
    """Names of the presets shipped with c2v_rag."""
    return sorted(p.name for p in PRESETS_DIR.iterdir() if (p / "causal2vec_config.json").is_file())


def resolve_variant_path(name_or_path: str | Path | None) -> Path:
    """A variant directory for a preset name, a path, or None or ``"default"`` (the default preset, as
    ``c2v-rag eval default`` names it)."""
    if name_or_path is None or name_or_path == DEFAULT_ALIAS:
        name_or_path = DEFAULT_PRESET
    if not str(name_or_path).strip():  # Path("") is the working directory
        raise VariantLoadError(
            "an empty variant name: pass a variant directory, a preset name, or nothing for the default preset"
        )
    candidate = Path(name_or_path).expanduser()
    if candidate.is_dir():
        return candidate
    preset = PRESETS_DIR / str(name_or_path)
    if preset.is_dir():
        return preset
    raise VariantLoadError(
        f"{str(name_or_path)!r} is neither a variant directory nor a preset. Presets: "
        f"{', '.join(list_presets()) or '(none)'}. To build one from base models use "
        "Causal2Vec.from_components(decoder=..., encoder=...)."
    )
