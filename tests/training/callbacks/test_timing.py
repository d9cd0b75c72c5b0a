"""time/epoch_s: the wall time of whole epochs only, also after a resume."""

from types import SimpleNamespace

from segnet.training.callbacks.timing import EpochTimer


class Logged:
    def __init__(self):
        self.values: dict[str, list[float]] = {}

    def log(self, name, value, **kwargs):
        self.values.setdefault(name, []).append(value)


def run_epoch(timer, trainer, module, batches, epoch_start_hook=True):
    if epoch_start_hook:
        timer.on_train_epoch_start(trainer, module)
    for i in batches:
        timer.on_train_batch_start(trainer, module, None, i)
        timer.on_train_batch_end(trainer, module, None, None, i)
    timer.on_train_epoch_end(trainer, module)


def test_an_epoch_resumed_part_way_is_not_reported_as_an_epoch():
    trainer = SimpleNamespace(is_global_zero=True, current_epoch=2)
    module = Logged()
    timer = EpochTimer()
    # a resume from a checkpoint saved at batch 5 of 8, where Lightning may skip the epoch's
    # start hook: before, the epoch's time was measured from 0 (the machine's uptime)
    run_epoch(timer, trainer, module, range(5, 8), epoch_start_hook=False)
    assert "time/epoch_s" not in module.values
    run_epoch(timer, trainer, module, range(8))  # the next epoch is whole
    (epoch_s,) = module.values["time/epoch_s"]
    assert 0 <= epoch_s < 60
    run_epoch(timer, trainer, module, range(8), epoch_start_hook=False)  # whole, hook skipped
    assert len(module.values["time/epoch_s"]) == 2 and module.values["time/epoch_s"][1] < 60
    assert len(module.values["time/startup_s"]) == 1  # once, at this process's first epoch
