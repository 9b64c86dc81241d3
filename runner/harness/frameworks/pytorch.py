"""PyTorch: the builder's ``nn.Module`` with the ``state_dict`` loaded (``weights_only``).

The checkpoint loads strictly (a missing or unexpected key is an error that names them).
For provenance (``harness/provenance.py``) the evaluator's forward passes run under a
dispatch mode that sees every ATen operator: each tensor an operator reads that no
operator of the pass produced (parameters, buffers, constants, tensors held anywhere the
builder put them, tensors made from numpy) is noted in the ledger.
"""

from __future__ import annotations

import weakref
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import HarnessError
from ..provenance import walk_held
from . import LoadedModel, export_failure, float_tensors, import_builder, require_file

if TYPE_CHECKING:
    from torch import nn

INPUT_NAME, OUTPUT_NAME = "input", "scores"


# ``python3 -m harness features`` reads this framework's models (runner/harness/features.py).
FEATURE_READER = "a forward pre-hook on the last layer"

def configure_threads(threads: int) -> None:
    """Thread pools must be sized before torch does any parallel work."""
    import torch  # lazy: optional (torch: only in images with PyTorch)

    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already started; recorded as-is in info.json


# torch wraps a dispatch mode's handler in ``torch._dynamo.disable`` unless the mode says
# otherwise, and that import costs about a second on two cores at the first recorded pass.
# Nothing in the evaluator is compiled, so there is nothing for dynamo to skip.
_NOTHING_COMPILED = False


def warm_up() -> None:
    """One pass of the runner's own op under a dispatch mode like the ledger's, so the first
    recorded pass pays no one-time cost. No code of the entry runs here."""
    import torch  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._python_dispatch import TorchDispatchMode  # lazy: optional (torch: only in images with PyTorch)

    class Quiet(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return _NOTHING_COMPILED

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Quiet():
        torch.ones(2) + 1


def _normalise(value, precision: str | None) -> np.ndarray:
    import torch  # lazy: optional (torch: only in images with PyTorch)

    t = torch.from_numpy(np.asarray(value)) if isinstance(value, np.ndarray) else value.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.is_floating_point():
        if precision is not None:
            t = t.to(getattr(torch, precision))
        return t.to(device="cpu", dtype=torch.float32).contiguous().numpy()
    return t.to(device="cpu", dtype=torch.int64).contiguous().numpy()


def _uses_mode(model, ledger):
    """A dispatch mode noting every tensor an operator reads that the pass did not produce."""
    import torch  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._python_dispatch import TorchDispatchMode  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._pytree import tree_flatten  # lazy: optional (torch: only in images with PyTorch)

    names: dict[int, str] = {}
    for name, t in list(model.named_parameters(remove_duplicate=False)) + list(model.named_buffers(remove_duplicate=False)):
        names.setdefault(id(t), name)

    class Uses(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return _NOTHING_COMPILED

        def __init__(self):
            super().__init__()
            # ids of the tensors the pass produced; a tensor's id leaves the set when the tensor
            # is freed (before CPython can give the id to another), so an id is never mistaken
            # for another tensor's, and nothing the pass made is kept alive by this record (a
            # forward pass that trains would otherwise hold every tensor it ever made)
            self.produced: set[int] = set()
            self.noted: set[tuple[int, int]] = set()
            self.held: list = []  # noted tensors stay alive, so their ids are not reused

        def reset(self) -> None:
            """A new forward pass: what the last one produced is not an input of this one."""
            self.produced.clear()

        def allow(self, t) -> None:
            self.produced.add(id(t))
            weakref.finalize(t, self.produced.discard, id(t))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            for t in tree_flatten((args, kwargs))[0]:
                if isinstance(t, torch.Tensor) and id(t) not in self.produced:
                    self.note(t, func)
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and id(t) not in self.produced:
                    self.allow(t)
            return out

        def note(self, t, func) -> None:
            base = t._base if t._base is not None else t  # a view: its whole tensor
            key = (id(base), base._version)
            if key in self.noted:
                return
            self.noted.add(key)
            self.held.append(base)
            precision = str(base.dtype).removeprefix("torch.") if base.is_floating_point() else None
            where = names.get(id(base)) or f"a tensor read by {func}"
            # Inside __torch_dispatch__ this mode is off: reading the tensor here is not a use.
            ledger.note(base, where, precision, base.numel() * base.element_size(),
                        tuple(base.shape), str(base.dtype).removeprefix("torch."))

    return Uses()


class TorchModel(LoadedModel):
    native: nn.Module
    checkpoint: dict | None = None  # the state dict as read from the file
    _uses = None
    device: str = "cpu"

    def to_device(self, device: str) -> None:
        """The evaluator of a run with GPUs predicts on the GPU, in fp32 without TF32, so its
        answers are the CPU's up to rounding (tests/gpu checks them against the CPU's)."""
        import torch  # lazy: optional (torch: only in images with PyTorch)

        if device == "cpu":
            return
        if device != "cuda":
            raise HarnessError(f"unknown device {device!r}; the evaluator knows cpu and cuda")
        if not torch.cuda.is_available():
            raise HarnessError("the run has GPUs but none is visible in the evaluator's container "
                               f"(torch {torch.__version__}, CUDA build {torch.version.cuda})")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.native.to("cuda")
        self.device = "cuda"

    def predict_batch(self, images: np.ndarray) -> np.ndarray:
        import torch  # lazy: optional (torch: only in images with PyTorch)

        x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
        if self.device != "cpu":
            x = x.to(self.device)
        mode = self._uses or nullcontext()
        with torch.no_grad():
            if self._uses is not None:
                self._uses.reset()
                self._uses.allow(x)
            with mode:
                out = self.native(x)
            out = out.float().cpu().numpy()
            if self._uses is not None:
                self._uses.reset()
            return out

    def span_scores(self, contexts: list[str], questions: list[str]):
        """Questions (run contract, "Question answering"): the model's ``encode`` turns the
        texts into integer tensors (its tokens and each token's character span in its
        context, ``offsets``); its forward pass, recorded for provenance like an image
        batch, gives start and end scores per token. Returns (offsets, start, end) as numpy."""
        import torch  # lazy: optional (torch: only in images with PyTorch)

        encode = getattr(self.native, "encode", None)
        if not callable(encode):
            raise HarnessError("a question-answering model needs an encode(contexts, questions) method "
                               "(run contract, \"Question answering\")")
        batch = encode(list(contexts), list(questions))
        if not isinstance(batch, dict) or "offsets" not in batch:
            raise HarnessError("encode() must return a dict of tensors with an 'offsets' entry")
        for name, t in batch.items():
            if not isinstance(t, torch.Tensor) or t.is_floating_point() or t.is_complex():
                raise HarnessError(f"encode() returned {name!r} that is not an integer tensor: the model's "
                                   "numbers must come from its checkpoint, not from encode()")
        if self.device != "cpu":
            batch = {k: v.to(self.device) for k, v in batch.items()}
        mode = self._uses or nullcontext()
        with torch.no_grad():
            if self._uses is not None:
                self._uses.reset()
                for t in batch.values():
                    self._uses.allow(t)
            with mode:
                out = self.native(**batch)
            if self._uses is not None:
                self._uses.reset()
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise HarnessError("a question-answering model's forward must return (start_scores, end_scores)")
        start, end = (o.float().cpu().numpy() for o in out)
        return batch["offsets"].cpu().numpy(), start, end

    # -- provenance and sensitivity (the evaluator) ----------------------------------------
    def checkpoint_tensors(self) -> dict:
        return dict(self.checkpoint or {})

    normalise = staticmethod(_normalise)

    def record_uses(self, ledger) -> None:
        """From now on, note in ``ledger`` what the forward passes read; and what the model holds."""
        import torch  # lazy: optional (torch: only in images with PyTorch)

        for where, t in walk_held(self.native, lambda o: isinstance(o, torch.Tensor)):
            value = t if isinstance(t, torch.Tensor) else torch.from_numpy(np.asarray(t))
            precision = str(value.dtype).removeprefix("torch.") if value.is_floating_point() else None
            ledger.note(value, where, precision, value.numel() * value.element_size(), tuple(value.shape),
                        str(value.dtype).removeprefix("torch."))
        self._uses = _uses_mode(self.native, ledger)

    def stop_recording(self) -> None:
        self._uses = None

    def shuffle_weights(self, seed: int) -> int:
        """Permute the elements of every tensor the checkpoint loaded; return how many."""
        import torch  # lazy: optional (torch: only in images with PyTorch)

        g = torch.Generator().manual_seed(seed)
        shuffled = 0
        with torch.no_grad():
            for t in self.native.state_dict(keep_vars=True).values():
                if t.numel() > 1:  # integer tensors too: a checkpoint may carry data, labels included
                    flat = t.detach().reshape(-1)
                    t.detach().copy_(flat[torch.randperm(flat.numel(), generator=g)].reshape(t.shape))
                    shuffled += 1
        return shuffled

    def export_onnx(self, input_shape: tuple[int, ...], path: Path, opset: int) -> dict:
        # The TorchScript-based exporter (dynamo=False) needs no extra package and gives a
        # static graph that every backend accepts.
        import torch  # lazy: optional (torch: only in images with PyTorch)

        dummy = torch.zeros(input_shape, dtype=torch.float32)
        try:
            with torch.inference_mode(False), torch.no_grad():
                torch.onnx.export(
                    self.native, (dummy,), str(path), opset_version=opset, dynamo=False,
                    input_names=[INPUT_NAME], output_names=[OUTPUT_NAME], do_constant_folding=True,
                )
        except Exception as exc:
            raise export_failure("PyTorch", opset, exc) from None
        return {"exporter": "torch.onnx.export (TorchScript, dynamo=False)", "torch_version": torch.__version__,
                "input_name": INPUT_NAME, "output_name": OUTPUT_NAME}


def _names(keys, limit: int = 8) -> str:
    keys = list(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def load(entry_dir: Path, builder: str, weights: Path) -> TorchModel:
    import torch  # lazy: optional (torch: only in images with PyTorch)

    build = import_builder(entry_dir, builder)
    digest = require_file(weights)
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which file, not a traceback
        raise HarnessError(f"cannot read the weights {weights}: {exc}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise HarnessError(f"the weights {weights} are not a state_dict (a dict of tensors)")
    model = build()
    if not isinstance(model, torch.nn.Module):
        raise HarnessError(f"{builder} returned a {type(model).__name__}, not a torch.nn.Module")
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        parts = ([f"missing keys {_names(missing)}"] if missing else []) + \
                ([f"unexpected keys {_names(unexpected)}"] if unexpected else [])
        raise HarnessError(f"the weights {weights} do not fit the model {builder} builds: {'; '.join(parts)}")
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError) as exc:
        raise HarnessError(f"the weights {weights} do not fit the model {builder} builds: {exc}") from None
    model.eval()
    loaded = TorchModel("pytorch", torch.__version__, model, weights, digest, "NCHW")
    loaded.checkpoint = state
    return loaded


def initial_tensors(entry_dir: Path, builder: str, input_shape: tuple[int, ...]) -> list[dict]:
    """The untrained model's float tensors, by their ``state_dict`` names (parameters and
    buffers alike: a buffer can carry a network as well as a parameter can)."""
    import torch  # lazy: optional (torch: only in images with PyTorch)

    model = import_builder(entry_dir, builder)()
    if not isinstance(model, torch.nn.Module):
        raise HarnessError(f"{builder} returned a {type(model).__name__}, not a torch.nn.Module")
    state = model.state_dict()
    return float_tensors({k: v.detach().float().cpu().numpy() if v.is_floating_point() else v.cpu().numpy()
                          for k, v in state.items()})


# -- its FLOP counter (``python3 -m harness flops``, harness/flops.py) ---------------------------
def _bytes_counter():
    import torch  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._python_dispatch import TorchDispatchMode  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils._pytree import tree_flatten  # lazy: optional (torch: only in images with PyTorch)

    class BytesTouched(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            flat, _ = tree_flatten((args, kwargs, out))
            self.bytes += sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))
            return out

    return BytesTouched


def count_flops(entry_dir: Path, builder: str, input_shape: list[int], num_classes: int, batch: int) -> dict:
    """One training step's and one batch-1 inference's FLOPs and bytes touched, counted with
    ``torch.utils.flop_counter.FlopCounterMode`` on the untrained model the builder returns."""
    import torch  # lazy: optional (torch: only in images with PyTorch)
    import torch.nn.functional as F  # lazy: optional (torch: only in images with PyTorch)
    from torch.utils.flop_counter import FlopCounterMode  # lazy: optional (torch: only in images with PyTorch)

    BytesTouched = _bytes_counter()
    build = import_builder(entry_dir, builder)
    try:
        model = build()
    except Exception as exc:
        raise HarnessError(f"the builder {builder} failed: {type(exc).__name__}: {exc}") from None
    torch.manual_seed(0)

    def measured(step):
        with FlopCounterMode(display=False) as flops, BytesTouched() as touched:
            step()
        return {"flops": int(flops.get_total_flops()), "bytes": int(touched.bytes)}

    def train_step():
        x = torch.rand(batch, *input_shape) * 255  # the stored scale: normalisation is the model's
        y = torch.randint(0, num_classes, (batch,))
        F.cross_entropy(model(x), y).backward()

    def infer_one():
        with torch.no_grad():
            model(torch.rand(1, *input_shape) * 255)

    model.train()
    train = measured(train_step)
    model.eval()
    infer = measured(infer_one)
    params = sum(p.numel() for p in model.parameters())
    return {"batch_size": batch, "parameters": int(params), "train_step": train, "inference_item": infer,
            "torch": torch.__version__}
