# Set-up and the two everyday jobs. `make demo` and `make test` create .venv
# when missing. Override the PyTorch build with TORCH_SPEC, e.g.
#   make test TORCH_SPEC="torch==2.9.1 torchvision==0.24.1"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# glibc allocator settings: on these VMs page faults are costly, and keeping
# freed memory instead of returning it to the OS halves the LiteMedSAM torch
# encoder time (1.01 -> 0.56 s/pass). The mmap AND the trim thresholds are both
# needed: trim + top pad alone made it slower (1.28 s). OpenVINO, the default
# encoder engine, is unaffected. (docs/performance.md.)
export MALLOC_MMAP_THRESHOLD_ ?= 4294967296
export MALLOC_TRIM_THRESHOLD_ ?= 4294967296
export MALLOC_TOP_PAD_ ?= 1073741824
export SAM2_BUILD_CUDA ?= 0

.PHONY: install system-deps demo test test-quick reproduce docs bench sample-data clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH_SPEC)
	$(BIN)/python -m pip install --quiet -e '.[test,sam2,sam,docs,pyqt6]'
	# rt-utils: the RTSTRUCT rasterisation is checked against it (tests/test_rtstruct.py); --no-deps, since it asks
	# for opencv-python, whose Qt plugins would replace the headless OpenCV napari's Qt runs beside
	$(BIN)/python -m pip install --quiet --no-deps 'rt-utils>=1.2'
	touch $(STAMP)

# Xvfb for the napari GUI tests and the X/OpenGL libraries the xcb plugins of PyQt5 and PyQt6 (the
# [pyqt6] extra: the clinician session runs on both) load (Debian packages; installed only when one is
# missing). libxcb-cursor0 is Qt 6's alone; libglib2.0-0 both Qt cores link.
SYSTEM_PACKAGES := xvfb xauth libgl1 libegl1 libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 \
	libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 libxcb-xinerama0 libxcb-xfixes0 \
	libxcb-shape0 libxcb-cursor0 libdbus-1-3 libfontconfig1 libglib2.0-0

system-deps:
	@if ! dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1; then \
		echo "installing system packages: $(SYSTEM_PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi

# The main job on the bundled sample data with the default model (LiteMedSAM, CPU):
# benchmark the video phantom (first-frame box, forward propagation) into a
# run folder with a report; then describe the CT phantom, segment its kidney
# from a box on the middle slice, propagate, and score it against the truth.
demo: $(STAMP)
	rm -rf out/demo/run_video
	$(BIN)/medsam-eval run sample_data/phantom_video --model litemedsam --protocol medsam2 --out out/demo/run_video
	$(BIN)/medsam-eval info sample_data/phantom_ct/image.nii.gz --label sample_data/phantom_ct/label.nii.gz
	$(BIN)/medsam-eval segment sample_data/phantom_ct/image.nii.gz --modality CT --box 63 50 75 69 --slice 22 \
		--label-value 2 --out out/demo/kidney_litemedsam.nii.gz
	$(BIN)/medsam-eval score out/demo/kidney_litemedsam.nii.gz sample_data/phantom_ct/label.nii.gz --labels 2

# Every behaviour check (pyproject's addopts leave out the tests marked reproduce), on TEST_WORKERS
# pytest-xdist workers, each test file on one worker (a module's fixtures made once), the longest files first
# (tests/conftest.py), each worker on one thread: on 2 cores, 2 workers took 1144 s where one process took
# 1529 s, with the same CPU-seconds. A third worker was faster (799 -> 736 s) but slowed the local Ray tests
# about 4x (two workers computing beside Ray on two cores): kept at 2 (docs/architecture.md#tests).
# TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: $(STAMP) system-deps
	$(BIN)/python -m pytest -q --durations=15 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# The dataset-scale figures the docs state (tests/figures.py): the official-script mode on 20 hippocampus
# cases, DeepLesion, the phantoms, the 10 colonoscopy clips, MedSAM2's scripts on every case, the corrections
# and paint curves, the whole clinician session, the precision rows (where the CPU has the instructions).
# Each figure is printed beside the value the docs state; a miss fails. docs/performance.md says how long.
reproduce: $(STAMP) system-deps
	$(BIN)/python -m pytest -q -m reproduce --durations=15

# The inner loop: every test but the GUI tests and those marked slow (dataset-scale figures, model
# exports, Ray, killed processes: each over a few seconds); under 3 minutes on 2 cores.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -q -m "not gui and not slow"

# The documentation site (mkdocs.yml, docs/) into site/, warnings as errors: a broken link or anchor, a page
# missing from the navigation, a medsam-eval code line naming an option the CLI does not have. The
# command-line reference is written from the live parsers (scripts/cli_reference.py) while it builds.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The performance suite (docs/performance.md): each script prints the CPU
# (model, family/model, cores, clock, estimated fp32 peak: benchmarks/_machine.py),
# medians, its named baseline measured in the same run, and the ratio; the
# encoder scripts add GFLOP per pass and the GFLOP/s reached. About 45 min on
# 2 cores; `make bench BENCH_ARGS=--quick` runs the short versions.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python benchmarks/propagation_speed.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/propagation_rules_speed.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/latency.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/bench_metrics.py
	$(BIN)/python benchmarks/benchmark_throughput.py
	$(BIN)/python benchmarks/encoder_variants.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/encode_ahead_speed.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/embedding_store_rerun.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/ray_overhead.py
	$(BIN)/python benchmarks/responsiveness.py

sample-data: $(STAMP)
	$(BIN)/python scripts/make_sample_data.py

clean:
	rm -rf $(VENV) .pytest_cache
