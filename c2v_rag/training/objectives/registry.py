"""Every training objective, by kind: the configs a recipe's ``objective:`` section may hold, and their builders.

:data:`OBJECTIVES` lists the objective classes; :data:`ObjectiveConfig`, the type of ``TrainConfig.objective``,
is the union of their configs told apart by ``kind``. Adding an objective is one new module (its config and
its :class:`~c2v_rag.training.objectives.base.Objective`) and its line in :data:`OBJECTIVES` (with the import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import BeforeValidator, ConfigDict, Field, TypeAdapter

from c2v_rag.core.wording import in_words
from c2v_rag.training.objectives.base import BaseObjectiveConfig, Objective, ObjectiveContext
from c2v_rag.training.objectives.contrastive import ContrastiveObjective
from c2v_rag.training.objectives.distill import DistillObjective
from c2v_rag.training.objectives.mntp import MNTPObjective
from c2v_rag.training.objectives.reconstruction import ReconstructionObjective
from c2v_rag.training.objectives.simcse import SimCSEObjective


def _by_kind(*objectives: type[Objective[Any]]) -> dict[str, type[Objective[Any]]]:
    by_kind: dict[str, type[Objective[Any]]] = {}
    for objective in objectives:
        kind = objective.kind()
        if kind in by_kind:
            raise TypeError(f"{by_kind[kind].__name__} and {objective.__name__} are both objective.kind {kind!r}")
        by_kind[kind] = objective
    return by_kind


OBJECTIVES: dict[str, type[Objective[Any]]] = _by_kind(
    ContrastiveObjective, SimCSEObjective, MNTPObjective, ReconstructionObjective, DistillObjective
)
"""The objective classes, by the ``kind`` that names them."""

DEFAULT_KIND = "contrastive"
"""The kind of an ``objective:`` section that names none."""

CONFIGS: dict[str, type[BaseObjectiveConfig]] = {kind: objective.config_type for kind, objective in OBJECTIVES.items()}

# A variant's saved train_config.yaml may list the fields of several kinds side by side, each at its value
# (the presets' do). In a mapping holding all of these, a field of another kind that holds that kind's default
# says nothing about the run and is dropped; any other field of another kind is refused, as anywhere else.
SIDE_BY_SIDE = frozenset({"mask_probability", "mask_strategy", "mask_token", "dropout", "alpha"})


def _owners(field: str) -> list[str]:
    return [kind for kind, config in CONFIGS.items() if field in config.model_fields]


def _is_default(field: str, value: Any) -> bool:
    return any(
        value == config.model_fields[field].get_default(call_default_factory=True)
        for config in CONFIGS.values()
        if field in config.model_fields
    )


def _listed(kinds: list[str]) -> str:
    return in_words([repr(kind) for kind in kinds])


def _checked_fields(raw: Any) -> Any:
    """The ``objective:`` mapping with its kind filled in, or a message naming each field its kind does not take.

    A config instance passes as it is; an unknown kind is left to the union, whose message lists the kinds.
    """
    if not isinstance(raw, dict):
        return raw
    raw = {"kind": DEFAULT_KIND, **raw}
    kind = raw["kind"]
    config = CONFIGS.get(kind) if isinstance(kind, str) else None
    if config is None:
        return raw
    foreign = [field for field in raw if field not in config.model_fields]
    if SIDE_BY_SIDE <= raw.keys():
        dropped = {field for field in foreign if _owners(field) and _is_default(field, raw[field])}
        raw = {field: value for field, value in raw.items() if field not in dropped}
        foreign = [field for field in foreign if field not in dropped]
    problems = []
    for field in foreign:
        owners = _owners(field)
        if owners:
            problems.append(
                f"objective.{field} is a field of objective.kind {_listed(owners)}; objective.kind={kind!r} has none"
            )
        else:
            problems.append(f"objective.{field} is not a field of any objective.kind")
    if problems:
        own = sorted(set(config.model_fields) - {"kind"})
        takes = f"takes {', '.join(own)}" if own else "takes no other field"
        raise ValueError(
            f"{'; '.join(problems)}. Remove {'it' if len(problems) == 1 else 'them'} (objective.kind={kind!r} {takes})"
        )
    return raw


if TYPE_CHECKING:
    # To a type checker an objective config is the common base; pydantic validates with the union below.
    ObjectiveConfig = BaseObjectiveConfig
else:
    ObjectiveConfig = Annotated[
        Union[tuple(objective.config_type for objective in OBJECTIVES.values())],  # noqa: UP007 (built at run time)
        Field(discriminator="kind"),
        BeforeValidator(_checked_fields),
    ]
    """One of the configs of :data:`OBJECTIVES`, picked by ``kind`` (default :data:`DEFAULT_KIND`)."""

_ADAPTER: TypeAdapter[BaseObjectiveConfig] = TypeAdapter(ObjectiveConfig, config=ConfigDict(title="objective"))


def objective_config(**fields: Any) -> BaseObjectiveConfig:
    """The config an ``objective:`` section with ``fields`` describes, validated as ``TrainConfig`` does."""
    return _ADAPTER.validate_python(fields)


def build_objective(config: BaseObjectiveConfig, context: ObjectiveContext) -> Objective[Any]:
    """The objective ``config`` names, built for ``context``, after checking that it can run as the run asks."""
    kind = config.kind
    objective = OBJECTIVES[kind]
    if context.distributed and not objective.multi_process:
        raise ValueError(f"objective.kind={kind!r} runs on one process for now; launch without torchrun")
    if context.stepper.mini_batch_size is not None and not objective.gradient_cache:
        raise ValueError(f"objective.kind={kind!r} has no GradCache path; unset training.mini_batch_size")
    return objective.from_config(config, context)
