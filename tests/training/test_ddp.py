"""Two CPU processes (gloo): negatives span both processes and the gradients equal one process's."""

from __future__ import annotations

import json
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from train_helpers import no_dropout_callback

from c2v_rag.training import TrainConfig, Trainer
from c2v_rag.training.ddp import gather_with_grad


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(rank: int, world: int, port: int) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)


def _gather_worker(rank: int, world: int, port: int, out: str) -> None:
    _env(rank, world, port)
    dist.init_process_group("gloo")
    x = torch.full((2, 3), float(rank + 1), requires_grad=True)
    gathered = gather_with_grad(x)
    weights = torch.arange(gathered.numel(), dtype=torch.float32).view_as(gathered) * (rank + 1)
    (gathered * weights).sum().backward()
    torch.save({"gathered": gathered.detach(), "grad": x.grad}, os.path.join(out, f"{rank}.pt"))
    dist.barrier()  # no rank tears gloo down while another still talks to it (an abort seen once in CI)
    dist.destroy_process_group()


def _train_worker(rank: int, world: int, port: int, raw: str, out: str) -> None:
    from safetensors.torch import save_file

    _env(rank, world, port)
    trainer = Trainer(TrainConfig.model_validate(json.loads(raw)), callbacks=[no_dropout_callback])
    trainer.setup()
    no_dropout_callback(trainer, 0)
    record = trainer._train_step(0)
    if rank == 0:
        grads = {n: p.grad.contiguous() for n, p in trainer.model.named_parameters() if p.requires_grad}
        save_file(grads, os.path.join(out, "grads.safetensors"))
        with open(os.path.join(out, "record.json"), "w") as handle:
            json.dump(record, handle)
    dist.barrier()  # no rank tears gloo down while another still talks to it (an abort seen once in CI)
    dist.destroy_process_group()


def test_gather_with_grad_sums_every_process_gradient(tmp_path):
    mp.start_processes(_gather_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    results = [torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in range(2)]
    expected_rows = torch.cat([torch.full((2, 3), 1.0), torch.full((2, 3), 2.0)])
    index = torch.arange(12, dtype=torch.float32).view(4, 3)
    for rank, result in enumerate(results):
        assert torch.equal(result["gathered"], expected_rows)
        # d/dx_r of sum over processes s of <gathered, index * (s + 1)> = 3 * index[rows of r].
        torch.testing.assert_close(result["grad"], 3 * index[2 * rank : 2 * rank + 2])


@pytest.mark.parametrize("mini_batch_size", [None, 3], ids=["whole", "gradcache"])
def test_two_process_ddp_matches_one_process_full_batch(tiny_recipe, tmp_path, mini_batch_size):
    """test_two_process_ddp_matches_one_process_full_batch: 2 x 4 queries over gloo == 8 queries in one process."""
    from safetensors.torch import load_file

    raw = tiny_recipe(batch_size=4, mini_batch_size=mini_batch_size)
    raw["output"]["dir"] = str(tmp_path / "ddp")
    out = tmp_path / "out"
    out.mkdir()
    mp.start_processes(_train_worker, args=(2, _free_port(), json.dumps(raw), str(out)), nprocs=2, start_method="spawn")
    ddp_grads = load_file(str(out / "grads.safetensors"))
    ddp_record = json.loads((out / "record.json").read_text())

    single_raw = tiny_recipe(batch_size=8, mini_batch_size=mini_batch_size)
    single_raw["output"]["dir"] = str(tmp_path / "single")
    single = Trainer(TrainConfig.model_validate(single_raw))
    single.setup()
    no_dropout_callback(single, 0)
    record = single._train_step(0)
    assert ddp_record["dataset"] == record["dataset"]
    assert ddp_record["loss"] == pytest.approx(record["loss"], rel=1e-5)
    grads = {n: p.grad for n, p in single.model.named_parameters() if p.requires_grad}
    assert grads.keys() == ddp_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(ddp_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.timeout(600)
def test_torchrun_cli_trains_with_two_processes(tiny_recipe, tmp_path):
    """The user's path: ``torchrun --nproc_per_node 2 -m c2v_rag.cli train recipe.yaml`` on CPU (gloo)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    from c2v_rag import Causal2Vec

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not Path(torchrun).exists():
        pytest.skip("torchrun is not on PATH")
    raw = tiny_recipe(steps=3, batch_size=2, save_every=2)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [
            torchrun,
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            "-m",
            "c2v_rag.cli",
            "train",
            str(recipe),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("variant written to") == 2  # both ranks finish; rank 0 wrote it
    out = Path(raw["output"]["dir"])
    history = [json.loads(line) for line in (out / "history.jsonl").open()]
    assert [h["step"] for h in history] == [1, 2, 3]
    state = json.loads((out / "checkpoints" / "step-000003" / "trainer_state.json").read_text())
    assert state["world_size"] == 2
    assert Causal2Vec.from_pretrained(out, device="cpu", dtype="float32").encode(["a b c"]).shape[0] == 1
