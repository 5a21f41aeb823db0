"""Messages of the model backends: bad checkpoint files say what they are
and never pass on torch's advice to unpickle them; options that do not exist are not
suggested; numbers and shapes are written plainly; device options that cannot apply warn
or fail with a one-line error, never a traceback.

Every checkpoint here fails before a network is built, so these tests are quick.
"""
from __future__ import annotations

import collections
import datetime
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from napari_medsam_eval.cli import build_parser, main, UsageError
from napari_medsam_eval.core.errors import DataError, MedsamEvalError
from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models.checkpoint_files import describe_file, plain, shape_text
from napari_medsam_eval.core.prompt import Prompt

#: the checkpoint-loading models, with a file name each recognises (SAM's type, SAM2's config)
MODELS = {
    "litemedsam": ("LiteMedSAM", "lite_medsam_user.pth"),
    "sam": ("SAM", "sam_vit_b_user.pth"),
    "sam2": ("SAM2", "sam2.1_hiera_tiny.pt"),
    "medsam2": ("MedSAM2", "MedSAM2_user.pt"),
}
#: torch's advice, which must never reach a user
UNSAFE_WORDS = ("weights_only", "arbitrary code", "add_safe_globals", "trusted source", "Traceback")


def _bad_files(folder: Path, name: str) -> dict[str, tuple[Path, str]]:
    """Three bad checkpoints named ``name`` (each in its own folder): what each must be called."""
    made = {}
    rand = folder / "random" / name
    rand.parent.mkdir(parents=True)
    rand.write_bytes(np.random.default_rng(0).integers(0, 256, 8192, dtype=np.uint8).tobytes())
    made["random"] = (rand, "unrecognised binary data")
    text = folder / "text" / name
    text.parent.mkdir()
    text.write_text("these are my notes, not a checkpoint\n" * 20)
    made["text"] = (text, "a text file")
    pickled = folder / "pickle" / name
    pickled.parent.mkdir()
    with open(pickled, "wb") as handle:  # a plain pickle of an object that is not a tensor
        pickle.dump({"model": datetime.datetime(2024, 1, 1), "epoch": 3}, handle, protocol=4)
    made["pickle"] = (pickled, "a Python pickle")
    return made


@pytest.mark.parametrize("model", sorted(MODELS))
def test_bad_checkpoint_files_say_what_they_are_and_never_advise_unpickling(model, tmp_path):
    label, name = MODELS[model]
    for kind, (path, what) in _bad_files(tmp_path, name).items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch's "Detected pickle protocol 4" remark must not leak either
            with pytest.raises(DataError) as info:
                build_backend(model, checkpoint=path, device="cpu")
        message = str(info.value)
        assert message.startswith(f"{path}: not a readable PyTorch checkpoint of {label}: {what}"), (kind, message)
        assert "expected " in message and "\n" not in message, message
        for word in UNSAFE_WORDS:
            assert word not in message, (kind, message)
        assert info.value.__cause__ is None  # torch's exception (and its advice) is not chained either


def test_a_torch_file_holding_python_objects_is_named_without_loading_them(tmp_path):
    path = tmp_path / "MedSAM2_objects.pt"
    torch.save({"model": {"weight": torch.zeros(2)}, "when": datetime.datetime(2024, 1, 1)}, path)
    with pytest.raises(DataError) as info:
        build_backend("medsam2", checkpoint=path, device="cpu")
    message = str(info.value)
    assert "a zip archive (the format torch.save writes) that holds Python objects (datetime.datetime)" in message
    assert not any(word in message for word in UNSAFE_WORDS), message
    # a state dict whose entries are not tensors is refused before the model is built
    counted = tmp_path / "MedSAM2_counter.pt"
    torch.save({"model": collections.Counter(a=1, b=2)}, counted)
    with pytest.raises(DataError, match=r"MedSAM2_counter.pt: not a MedSAM2 checkpoint: entries that are not tensors \(a, b\)"):
        build_backend("medsam2", checkpoint=counted, device="cpu")


def test_describe_file_kinds(tmp_path):
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert describe_file(empty) == "an empty file"
    zipped = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(1)}, zipped)
    assert describe_file(zipped).startswith("a zip archive")


def test_sam2_config_hint_names_an_option_that_exists(tmp_path):
    path = tmp_path / "my_finetuned_sam2.pt"
    torch.save({"model": {}}, path)
    with pytest.raises(MedsamEvalError) as info:
        build_backend("sam2", checkpoint=path, device="cpu")
    message = str(info.value)
    assert "--model-options '{\"config\": " in message and "config=" in message
    assert "--config" not in message, message
    # the option the message names is a real option of `medsam-eval run` ...
    parser = build_parser()
    args = parser.parse_args(["run", str(tmp_path), "--out", str(tmp_path / "out"), "--model", "sam2",
                              "--model-options", '{"config": "sam2.1_hiera_t"}'])
    assert args.model_options == '{"config": "sam2.1_hiera_t"}'
    # ... and `--config` is not
    with pytest.raises(UsageError, match="unrecognized arguments: --config"):
        parser.parse_args(["run", str(tmp_path), "--out", str(tmp_path / "o"), "--config", "x"])


def test_numbers_and_shapes_are_written_plainly():
    assert plain(np.float64(2.0)) == "2" and plain(np.float32(0.5)) == "0.5" and plain(np.int64(7)) == "7"
    assert plain((np.float64(1.5), 2)) == "1.5, 2" and plain(torch.tensor(3.0)) == "3"
    assert shape_text((512, 512, 3)) == "512 x 512 x 3"
    with pytest.raises(MedsamEvalError) as info:
        build_backend("litemedsam", device="cpu", dtype=np.float64(2.0), engine="torch")
    assert str(info.value) == "model litemedsam: options: dtype must be text (or null), got 2"
    box = build_backend("box")
    prompt = Prompt(target_label=1, boxes=[(1.0, 1.0, 3.0, 3.0)])
    with pytest.raises(ValueError) as info:
        box.segment(np.zeros((4, 5, 6, 7)), prompt)
    assert "4 x 5 x 6 x 7" in str(info.value) and "(" not in str(info.value).split("got")[-1]
    with pytest.raises(ValueError) as info:
        box.check_prompt(Prompt(target_label=1, points=[(1.0, 2.0)], point_labels=[1]))
    assert str(info.value) == "box does not accept points prompts (accepts box)"


@pytest.mark.parametrize("model", ["box", "oracle"])
def test_device_options_of_models_without_a_network_warn(model):
    with pytest.warns(UserWarning, match=f"model '{model}' runs no network; --device cuda is ignored"):
        build_backend(model, device="cuda")
    with pytest.warns(UserWarning, match=f"model '{model}' runs no network; option\\(s\\) engine are ignored"):
        build_backend(model, engine="openvino")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no device given, or the model's own choice: nothing to say
        build_backend(model)
        build_backend(model, device="auto")
    with pytest.raises(MedsamEvalError, match="has no weights"):
        build_backend(model, checkpoint="x.pth")


def _missing_device() -> str:
    """A CUDA device this machine lacks: 'cuda' without a GPU, else one past the last GPU."""
    return "cuda" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"


@pytest.mark.parametrize("model,options", [
    ("litemedsam", {}),
    ("sam", {"random_init": True}),
    ("medsam2", {"random_init": True}),
])
def test_a_missing_cuda_device_is_a_one_line_error(model, options):
    device = _missing_device()
    with pytest.raises(MedsamEvalError) as info:
        build_backend(model, device=device, **options)
    message = str(info.value)
    assert f"device option '{device}'" in message and "\n" not in message
    if device == "cuda":
        assert "no CUDA GPU is usable on this machine" in message and "use --device cpu" in message


def test_cli_reports_model_errors_as_errors_not_internal_errors(tmp_path, shared_data, capsys):
    image = shared_data / "deeplesion_ct_npz" / "CT_Lesion_000001_02_01_008-023.npz"
    bad = _bad_files(tmp_path, "lite_medsam_user.pth")["pickle"][0]
    common = [str(image), "--out", str(tmp_path / "pred.npz"), "--box", "200", "200", "260", "260", "--no-propagate"]
    assert main(["segment", *common, "--checkpoint", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: not a readable PyTorch checkpoint of LiteMedSAM: a Python pickle"), err
    assert not any(word in err for word in UNSAFE_WORDS)
    assert main(["segment", *common, "--device", _missing_device()]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: device option") and "internal error" not in err
    assert main(["segment", *common, "--model", "box", "--checkpoint", str(bad)]) == 2
    assert "has no weights" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="model 'box' runs no network; --device cuda is ignored"):
        assert main(["segment", *common, "--model", "box", "--device", "cuda"]) == 0
    assert (tmp_path / "pred.npz").is_file()
    assert os.path.getsize(tmp_path / "pred.npz") > 0
