"""GroveModule: freezing policy, schedule, and a short training run that must learn."""
import warnings

import pytest
import torch

from cli import cli_main
from lightning_modules.schedules import WarmupLinearDecay
from tests.fixtures.tiny_cli import tiny_cli_args


def _module(root, tmp_path, *extra):
    return cli_main([*tiny_cli_args(root, tmp_path), *extra], run=False)


def test_paper_freezing_policy_frozen_parts_get_no_gradient_and_do_not_change(tiny_synthetic_root, tmp_path):
    cli = _module(tiny_synthetic_root, tmp_path, "--model.init_args.train_global_backbone=false",
                  "--model.init_args.train_grounding_backbone=false", "--model.init_args.train_llm=false")
    module, data = cli.model, cli.datamodule
    groups = module.model.parameter_groups()
    frozen = [p for g in ("global_backbone", "grounding_backbone", "llm_blocks") for _, p in groups[g]]
    trainable = [p for g in ("global_adapters", "vision_projector", "query_projector", "box_decoder", "heads",
                             "llm_embeddings", "grounding_pos_embed") for _, p in groups[g]]
    assert frozen and all(not p.requires_grad for p in frozen)
    assert all(p.requires_grad for p in trainable)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    before = [p.detach().clone() for p in frozen]
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2)
    losses, _, _ = module.compute_losses(batch)
    losses["loss"].backward()
    assert all(p.grad is None for p in frozen)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in trainable)
    optimizer.step()
    assert all(torch.equal(a, p) for a, p in zip(before, frozen))


def test_default_optimizer_is_the_papers_adamw(tiny_synthetic_root, tmp_path):
    cli = _module(tiny_synthetic_root, tmp_path, "--model.init_args.optimizer=null",
                  "--model.init_args.lr_scheduler=null")
    optimizer = cli.model.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW)
    group = optimizer.param_groups[0]
    assert group["lr"] == 5e-5 and tuple(group["betas"]) == (0.9, 0.95) and group["weight_decay"] == 0.0


def test_teacher_forced_rates_are_computed_even_without_updates(tiny_synthetic_root, tmp_path):
    # compute syncs across ranks, so a rank whose clips were all skipped must still call it
    module = _module(tiny_synthetic_root, tmp_path).model
    metric = module.teacher_forced_metrics["val"]
    calls = []
    compute = metric.compute
    metric.compute = lambda: calls.append(1) or compute()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module._log_teacher_forced("val")  # no update: nothing to log
    assert calls == [1]
    assert not [w for w in caught if "before the ``update``" in str(w.message)]


def test_warmup_linear_decay_curve():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = WarmupLinearDecay(opt, warmup_steps=4, total_steps=14)
    lrs = []
    for _ in range(15):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert lrs[9] == pytest.approx(0.5) and lrs[14] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="total_steps"):
        WarmupLinearDecay(opt, warmup_steps=4)


@pytest.mark.slow
def test_a_few_hundred_steps_lower_the_loss_substantially(tiny_synthetic_root, tmp_path):
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo's CpuThreads callback does: spinning OpenMP threads cost more here
    try:
        _train_and_check(tiny_synthetic_root, tmp_path)
    finally:
        torch.set_num_threads(threads)


def _train_and_check(tiny_synthetic_root, tmp_path):
    cli = _module(tiny_synthetic_root, tmp_path)
    module, data = cli.model, cli.datamodule
    data.setup("fit")
    loader = data.train_dataloader()
    batches = []  # decode a few epochs of real training batches once; the steps then cycle over them
    for epoch in range(4):
        loader.sampler.set_epoch(epoch)
        batches.extend(loader)
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-3, betas=(0.9, 0.95))
    history = []
    module.train()
    for step in range(240):
        losses, _, _ = module.compute_losses(batches[step % len(batches)])
        optimizer.zero_grad()
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        history.append({k: float(v) for k, v in losses.items()})
    first = {k: sum(h[k] for h in history[:12]) / 12 for k in history[0]}
    last = {k: sum(h[k] for h in history[-12:]) / 12 for k in history[0]}
    assert last["loss"] < 0.3 * first["loss"]
    assert last["lm"] < 0.2 * first["lm"]
    assert last["giou"] + last["l1"] < 0.7 * (first["giou"] + first["l1"])
    assert last["objectness"] < 0.7 * first["objectness"]


def test_a_checkpoint_weight_of_another_kind_is_refused_naming_the_key(tmp_path):
    from core.weights.dtypes import WeightDtypeError

    from lightning_modules.grove_module import GroveModule
    from models.grove import configuration

    module = GroveModule(**configuration.tiny_configs())
    state = {k: v.clone() for k, v in module.state_dict().items()}
    key = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2)
    state[key] = (state[key] * 100).to(torch.int32)
    path = tmp_path / "int.ckpt"
    torch.save({"state_dict": state, "hyper_parameters": dict(module.hparams),
                "pytorch-lightning_version": "2.4.0", "epoch": 0, "global_step": 0}, path)
    with pytest.raises(WeightDtypeError, match=rf"checkpoint: 1 weight\(s\).*{key}: stored torch.int32"):
        GroveModule.load_from_checkpoint(path, weights_only=False)


def test_windows_per_pass_is_an_evaluation_setting_passed_to_prediction(monkeypatch):
    import lightning_modules.grove_module as grove_module
    from models.grove import configuration

    for bad in (0, -2, 2.5, True, "3"):
        with pytest.raises(ValueError, match="model.windows_per_pass"):
            grove_module.GroveModule(**configuration.tiny_configs(), windows_per_pass=bad)
    module = grove_module.GroveModule(**configuration.tiny_configs(), windows_per_pass=3)
    assert "windows_per_pass" not in module.hparams  # decided by the command line, not the checkpoint
    seen = {}

    def spy(model, batch, **kwargs):
        seen.update(kwargs)
        return {"predictions": {}}

    monkeypatch.setattr(grove_module, "predict_clips", spy)
    module.predict_clips({})
    assert seen["windows_per_pass"] == 3
    module.predict_step({"keys": ["a"], "skipped": []}, 0)
    assert seen["windows_per_pass"] == 3
    assert grove_module.GroveModule(**configuration.tiny_configs()).inference_settings()["windows_per_pass"] is None


def test_windows_per_pass_from_the_command_line(tiny_synthetic_root, tmp_path):
    assert _module(tiny_synthetic_root, tmp_path, "--model.init_args.windows_per_pass=2").model.windows_per_pass == 2
