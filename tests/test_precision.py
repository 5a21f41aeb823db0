"""Precision as a LiteMedSAM option: fp32 / bf16 / int8, with real weights and real data.

The INT8 encoder is quantized once per test session (NNCF on a small calibration subset: the 5
SAM-Med2D CT slices, a set no test evaluates) into a private export cache, and reused by every
test here. The tolerances were measured: see each test.
"""
from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch

from napari_medsam_eval.cli import main
from napari_medsam_eval.core.cache import cache_dir
from napari_medsam_eval.models.checkpoint_files import ModelOptionError as OptionError
from napari_medsam_eval.models import build_backend
from napari_medsam_eval.models import litemedsam_engines as engines
from napari_medsam_eval.models.litemedsam import preprocess_slice
from napari_medsam_eval.models import cpu_precisions, litemedsam_precision
from napari_medsam_eval.models.litemedsam_precision import CalibrationOverlapError, calibration_set, int8_variant
from napari_medsam_eval.core.prompt import Prompt

from figures import REPRODUCE

pytestmark = pytest.mark.slow

#: the measured agreement of int8 and fp32 masks on the DeepLesion slice below (DSC between them),
#: with this session's small calibration set; see test_int8_masks_agree_with_fp32_on_a_real_slice
MASK_AGREEMENT_MIN = 0.9
#: relative L2 distance of the int8 embedding from fp32's on a real CT slice (measured ~0.1-0.3)
EMBEDDING_ERROR_MAX = 0.5


@pytest.fixture(scope="session")
def precision_cache():
    """The run's export cache (suite_isolation.py), not one of its own: fp32 is exported once for the whole
    run, and int8 quantized once on the 5 SAM-Med2D CT slices, the set the first-look tests calibrate on
    where the CPU has no bf16 (they reuse this export; a private cache made each twice)."""
    return cache_dir()


@pytest.fixture(scope="session")
def calibration(shared_data) -> str:
    return str(shared_data / "sammed2d_ct_2d")


@pytest.fixture(scope="session")
def fp32_backend(precision_cache):
    return build_backend("litemedsam", engine="openvino", device="cpu", embeddings=False)


@pytest.fixture(scope="session")
def int8_backend(precision_cache, calibration):
    return build_backend("litemedsam", engine="openvino", device="cpu", precision="int8", calibration=calibration,
                         embeddings=False)


@pytest.fixture(scope="session")
def lesion_slice(shared_data):
    """The middle slice of a DeepLesion volume with its lesion's box (from the truth, 2 px margin)."""
    with np.load(sorted((shared_data / "deeplesion_ct_npz").glob("*.npz"))[0]) as npz:
        image, truth = npz["imgs"], npz["gts"]
    z = int(np.flatnonzero(truth.reshape(len(truth), -1).any(axis=1)).mean())
    ys, xs = np.nonzero(truth[z])
    box = (xs.min() - 2, ys.min() - 2, xs.max() + 2, ys.max() + 2)
    return image[z], Prompt(target_label=1, slice_index=z, boxes=[tuple(float(v) for v in box)])


def _dice(a: np.ndarray, b: np.ndarray) -> float:
    total = a.sum() + b.sum()
    return 1.0 if total == 0 else float(2 * (a & b).sum() / total)


def test_int8_export_is_cached_under_its_own_key(fp32_backend, int8_backend, precision_cache, calibration):
    fp32_export = engines.export_key("openvino", fp32_backend.checkpoint_sha256)
    variant = int8_variant(int8_backend.calibration)
    int8_folder = precision_cache / engines.export_key("openvino", int8_backend.checkpoint_sha256, variant.name)
    assert int8_folder.name != fp32_export and "int8" in int8_folder.name
    assert (int8_folder / "encoder.xml").is_file() and (precision_cache / fp32_export / "encoder.xml").is_file()
    manifest = json.loads((int8_folder / "manifest.json").read_text())
    assert manifest["calibration"]["id"] == int8_backend.calibration.id
    assert int8_backend.describe()["precision"] == "int8"
    assert int8_backend.describe()["export"] == str(int8_folder / "encoder.xml")
    assert manifest["unquantized_precision"] == variant.hint
    counted = f"openvino-{variant.name}"
    before = engines.export_counts[counted]
    again = build_backend("litemedsam", engine="openvino", precision="int8", calibration=calibration)
    assert again.describe()["export"] == str(int8_folder / "encoder.xml")
    assert engines.export_counts[counted] == before, "a second int8 build must reuse the cached export"


def test_the_precision_changes_the_embedding_store_key(fp32_backend, int8_backend, lesion_slice, precision_cache,
                                                       monkeypatch):
    padded = preprocess_slice(lesion_slice[0])[0]
    # a CPU without bf16 refuses bf16 (next test): the key is what is checked here, so such a CPU is told it has it
    monkeypatch.setattr(cpu_precisions, "cpu_has_bf16", lambda: True)
    bf16 = build_backend("litemedsam", engine="openvino", precision="bf16")
    keys = [b.embedding_key(padded) for b in (fp32_backend, bf16, int8_backend)]
    assert len({k.digest() for k in keys}) == 3 and len({k.engine for k in keys}) == 3
    assert "calibration_id=" in keys[2].engine and "int8" in keys[2].engine
    assert len({k.content for k in keys}) == 1  # the same slice: only the precision differs


def test_bf16_is_refused_where_it_would_run_as_fp32(precision_cache, monkeypatch):
    """A CPU without bf16 arithmetic: OpenVINO would compute fp32 under a bf16 label; refused, saying why."""
    if litemedsam_precision.cpu_has_bf16():  # this CPU computes bf16: it is taken away
        monkeypatch.setattr(cpu_precisions, "openvino_cpu_capabilities", lambda: ["FP32", "INT8", "BIN"])
    with pytest.raises(OptionError, match=r"no bf16 arithmetic \(OpenVINO's CPU plugin offers FP32, INT8.*under a bf16 label"):
        build_backend("litemedsam", engine="openvino", device="cpu", precision="bf16")
    for engine in ("onnxruntime", "torch"):  # neither computes bf16 on a CPU
        with pytest.raises(OptionError, match=f"precision bf16.*engine {engine}.*fp32"):
            build_backend("litemedsam", engine=engine, device="cpu", precision="bf16")


def test_bf16_where_the_cpu_has_it_moves_the_embedding(fp32_backend, lesion_slice):
    """The other side: where bf16 is accepted, it is computed (the embedding is not fp32's)."""
    padded = preprocess_slice(lesion_slice[0])[0]
    if not litemedsam_precision.cpu_has_bf16():
        with pytest.raises(OptionError, match="no bf16 arithmetic"):  # this CPU: refused, as above, for real
            build_backend("litemedsam", engine="openvino", device="cpu", precision="bf16")
        return
    bf16 = build_backend("litemedsam", engine="openvino", device="cpu", precision="bf16")
    ours, ref = bf16.encoder_engine(padded).numpy(), fp32_backend.encoder_engine(padded).numpy()
    assert 0.005 < float(np.linalg.norm(ours - ref) / np.linalg.norm(ref)) < 0.25


def test_int8_without_dot_product_instructions_warns(int8_backend, calibration, monkeypatch):
    """Where int8 buys no speed (no VNNI, AVX-VNNI or AMX-INT8), a build says so; where it does, nothing."""
    flags = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma {extra}\n"
    assert litemedsam_precision.int8_dot_product(flags.format(extra="")) is None
    assert litemedsam_precision.int8_dot_product(flags.format(extra="avx512f avx512_vnni")) == "AVX-512 VNNI"
    assert litemedsam_precision.int8_dot_product(flags.format(extra="avx_vnni amx_int8")) == "AMX-INT8, AVX-VNNI"
    monkeypatch.setattr(cpu_precisions, "int8_dot_product", lambda: None)
    with pytest.warns(RuntimeWarning, match="no int8 dot-product instructions.*no faster than fp32"):
        build_backend("litemedsam", engine="openvino", precision="int8", calibration=calibration)
    monkeypatch.setattr(cpu_precisions, "int8_dot_product", lambda: "AVX-512 VNNI")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        build_backend("litemedsam", engine="openvino", precision="int8", calibration=calibration)


def test_int8_masks_agree_with_fp32_on_a_real_slice(fp32_backend, int8_backend, lesion_slice):
    image, prompt = lesion_slice
    padded = preprocess_slice(image)[0]
    ours, ref = int8_backend.encoder_engine(padded).numpy(), fp32_backend.encoder_engine(padded).numpy()
    error = float(np.linalg.norm(ours - ref) / np.linalg.norm(ref))
    assert 0 < error <= EMBEDDING_ERROR_MAX, error  # int8 moves the embedding, within the measured bound
    fp32_mask = fp32_backend.segment(image, prompt).mask
    int8_mask = int8_backend.segment(image, prompt).mask
    assert fp32_mask.sum() > 50
    assert _dice(fp32_mask, int8_mask) >= MASK_AGREEMENT_MIN


def test_int8_runs_what_stays_unquantized_in_bf16_where_the_cpu_has_it(int8_backend):
    has_bf16 = litemedsam_precision.cpu_has_bf16()
    described = int8_backend.describe()
    assert described["inference_precision"] == described["unquantized_precision"] == ("bf16" if has_bf16 else "f32")
    assert ("bf16 for what stays unquantized" if has_bf16 else "fp32 for what stays unquantized") \
        in described["quantization"]
    assert int8_backend.encoder_engine.compiled.get_property("INFERENCE_PRECISION_HINT").to_string() \
        == described["inference_precision"]


def test_a_cpu_without_bf16_gets_fp32_for_the_rest_under_another_key(int8_backend, monkeypatch):
    variants = {}
    for has_bf16 in (True, False):
        monkeypatch.setattr(cpu_precisions, "cpu_has_bf16", lambda has_bf16=has_bf16: has_bf16)
        variants[has_bf16] = int8_variant(int8_backend.calibration)
    assert (variants[True].hint, variants[False].hint) == ("bf16", "f32")
    assert "this CPU lacks bf16" in variants[False].facts["quantization"]
    assert "this CPU has bf16" in variants[True].facts["quantization"]
    assert variants[True].name != variants[False].name  # their exports (fingerprints at that precision) never mix
    planned = [engines.planned_description("openvino", "0" * 64, 2, variant=v) for v in variants.values()]
    assert [p["inference_precision"] for p in planned] == ["bf16", "f32"]


def test_precision_options_are_checked(precision_cache):
    with pytest.raises(ValueError, match="precision must be one of"):
        build_backend("litemedsam", precision="int4")
    with pytest.raises(OptionError, match="OpenVINO"):
        build_backend("litemedsam", engine="torch", device="cpu", precision="int8")
    with pytest.raises(OptionError, match="disagree"):
        build_backend("litemedsam", precision="fp32", dtype="bfloat16")


def test_a_bad_precision_exits_2_with_one_error_line(shared_data, tmp_path, capsys):
    code = main(["run", str(shared_data / "deeplesion_ct_npz"), "--out", str(tmp_path / "run"), "--precision", "int4"])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "--precision" in errors[0] and "Traceback" not in err
    assert not (tmp_path / "run").exists()
    code = main(["run", str(shared_data / "deeplesion_ct_npz"), "--out", str(tmp_path / "run"), "--model", "box",
                 "--precision", "int8"])
    err = capsys.readouterr().err
    assert code == 2 and "applies to --model litemedsam only" in err


def test_calibration_on_the_evaluated_data_is_refused(shared_data, tmp_path, capsys, calibration, precision_cache):
    code = main(["run", calibration, "--out", str(tmp_path / "run"), "--precision", "int8",
                 "--model-options", json.dumps({"calibration": calibration})])
    err = capsys.readouterr().err
    assert code == 2 and "calibrated on the data being evaluated" in err and not (tmp_path / "run").exists()
    # a copy of a calibration image elsewhere is recognised by its content
    copied = tmp_path / "elsewhere.png"
    shutil.copy(next((shared_data / "sammed2d_ct_2d" / "images").glob("*.png")), copied)
    with pytest.raises(CalibrationOverlapError, match="content"):
        calibration_set(calibration).check_apart([copied])
    calibration_set(calibration).check_apart(sorted((shared_data / "deeplesion_ct_npz").glob("*.npz")))


def test_an_int8_run_records_its_precision_and_never_resumes_an_fp32_run(shared_data, tmp_path, capsys,
                                                                          calibration, precision_cache, int8_backend):
    dataset = str(shared_data / "deeplesion_ct_npz")
    cal = ["--model-options", json.dumps({"calibration": calibration})]
    fp32_run, int8_run = tmp_path / "fp32", tmp_path / "int8"
    common = ["--limit", "1", "--no-report", "--quiet"]
    assert main(["run", dataset, "--out", str(fp32_run), *common]) == 0
    assert main(["run", dataset, "--out", str(int8_run), "--precision", "int8", *cal, *common]) == 0
    capsys.readouterr()
    from napari_medsam_eval.benchmark import load_table

    for folder, precision in ((fp32_run, "fp32"), (int8_run, "int8")):
        table = load_table(folder)
        assert set(table["precision"]) == {precision}
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["model"]["precision"] == precision
    manifest = json.loads((int8_run / "manifest.json").read_text())
    assert manifest["config"]["model_options"]["precision"] == "int8"
    assert manifest["model"]["calibration"]["id"] == int8_backend.calibration.id
    # resuming the fp32 folder at int8 is refused, naming the difference
    code = main(["run", dataset, "--out", str(fp32_run), "--resume", "--precision", "int8", *cal, *common])
    err = capsys.readouterr().err
    assert code == 2 and "cannot resume" in err and "precision" in err and "int8" in err
    # the two runs compare case by case
    assert main(["compare", str(fp32_run), str(int8_run), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "dice" in out and "n" in out


def test_the_benchmark_request_carries_the_precision(shared_data, tmp_path):
    from napari_medsam_eval.benchmark.gui_job import checked_request

    dataset = shared_data / "deeplesion_ct_npz"
    with pytest.raises(ValueError, match="litemedsam only"):
        checked_request(dataset, tmp_path / "a", "box", "medsam2", precision="int8")
    assert checked_request(dataset, tmp_path / "a", "litemedsam", "medsam2", precision="int8").model_options == {
        "precision": "int8"}
    assert checked_request(dataset, tmp_path / "a", "litemedsam", "medsam2").model_options == {}


@REPRODUCE
@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_the_precision_table_on_deeplesion(shared_data, tmp_path, monkeypatch, precision, figure):
    """docs/precision.md's DeepLesion rows (``precision_cost.py --sets deeplesion``: the medsam2 protocol, the
    default calibration set), on a CPU with the instructions the precision is computed with (AVX-512 BF16 or
    AMX for bf16; int8 runs bf16 for what stays unquantized there, and needs int8 dot products to pay)."""
    if not litemedsam_precision.cpu_has_bf16():
        pytest.skip("this CPU has no bf16 arithmetic: docs/precision.md's rows were measured with it")
    if precision == "int8" and litemedsam_precision.int8_dot_product() is None:
        pytest.skip("this CPU has no int8 dot-product instructions")
    from napari_medsam_eval.benchmark import run_benchmark

    monkeypatch.setenv("MEDSAM_EVAL_SHARED_DATA", str(shared_data))  # where the default calibration set is
    table = run_benchmark(shared_data / "deeplesion_ct_npz", tmp_path / precision, "litemedsam", "medsam2",
                          model_options={"precision": precision})
    assert len(table) == 6 and (table["status"] == "ok").all() and set(table["precision"]) == {precision}
    figure(f"precision_deeplesion_{precision}", float(table["dice"].median()))
    figure.assert_all_match()
