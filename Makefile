# make demo  — install dependencies, build, import the example GPT-2
# make test  — install dependencies, build, run every test (ctest)
BUILD ?= build
CMAKE_ARGS ?=
LIT := /usr/lib/llvm-22/bin/lit

.PHONY: all deps configure build test demo docs fuzz bench opinfo opinfo-torch2 zoo sanitize clean

all: build

deps:
	@bash scripts/install-deps.sh
	@bash scripts/install-torch2.sh
	@bash scripts/install-cudnn-frontend.sh

$(BUILD)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DLLVM_EXTERNAL_LIT=$(LIT) $(CMAKE_ARGS)

configure: deps
	@$(MAKE) --no-print-directory $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD)

test: build
	@bash scripts/run-tests.sh $(BUILD)

demo: build
	@bash scripts/demo.sh $(BUILD)

# Op documentation generated from the ODS definitions.
docs: build
	ninja -C $(BUILD) mlir-doc
	cp $(BUILD)/docs/Dialects/FsdpDialect.md docs/FsdpDialect.md

# fsdp-opt, fsdp-run and fsdp-inspect under AddressSanitizer and
# UndefinedBehaviorSanitizer (build-sanitize/): the lit tests, the
# reliability suite, OpInfo's first samples and a slice of each zoo; any
# report fails it. SANITIZE_FAST=1: lit and reliability only.
sanitize: deps
	@bash scripts/sanitize.sh

fuzz: deps
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGET)

# The torchvision and torchaudio zoos up to 30M parameters: traced on 1 and
# 2 ranks, then the ONNX column (about 6 minutes each on two cores).
zoo: build
	@/usr/bin/python3 tests/e2e/zoo.py --fsdp-opt $(BUILD)/tools/fsdp-opt \
	  --fsdp-run $(BUILD)/tools/fsdp-run --ranks 2 --strict --known tacotron2
	@/usr/bin/python3 tests/e2e/zoo.py --fsdp-opt $(BUILD)/tools/fsdp-opt \
	  --fsdp-run $(BUILD)/tools/fsdp-run --onnx

# Every sample of every in-scope entry of PyTorch's op_db (164 s before the
# more family of 2026-11-29; 1816 s with it, beside a fresh-clone build).
opinfo: build
	@/usr/bin/python3 tests/e2e/opinfo.py --fsdp-opt $(BUILD)/tools/fsdp-opt \
	  --fsdp-run $(BUILD)/tools/fsdp-run --samples 1000 --min-pass 0.95

# The same on the pinned torch 2.x (its own op_db, through torch.export;
# about 21 minutes: export takes about 0.3 s a sample).
TORCH2_PYTHON ?= /opt/fsdp/torch2/bin/python
opinfo-torch2: build
	@sh tests/e2e/with_torch2.sh $(TORCH2_PYTHON) $(TORCH2_PYTHON) tests/e2e/opinfo.py \
	  --fsdp-opt $(BUILD)/tools/fsdp-opt --fsdp-run $(BUILD)/tools/fsdp-run \
	  --samples 1000 --min-pass 0.9 --frontend export

bench: build
	@bash bench/import_llama70b.sh $(BUILD)
	@/usr/bin/python3 bench/memory.py --fsdp-opt $(BUILD)/tools/fsdp-opt --fsdp-run $(BUILD)/tools/fsdp-run
	@/usr/bin/python3 bench/policies.py --build $(BUILD)
	@/usr/bin/python3 bench/prediction.py --build $(BUILD)
	@/usr/bin/python3 bench/scale.py --build $(BUILD)

clean:
	rm -rf $(BUILD) build-fuzz build-sanitize
