# The two commands of the README (demo, test), and each part of `make test` alone (scripts/part.sh runs each the
# same way scripts/test.sh does). tests/unit/test_makefile.py holds every target to a recipe that runs something.
.PHONY: setup demo test lint sanity newest collection unit integration molecule fleet bench

setup:
	scripts/setup.sh

demo:
	scripts/demo.sh

test:
	scripts/test.sh

lint: setup
	scripts/part.sh lint

sanity: setup
	scripts/part.sh sanity

newest: setup
	scripts/part.sh newest

collection: setup
	scripts/part.sh collection

unit: setup
	scripts/part.sh unit

integration: setup
	scripts/part.sh integration

molecule: setup
	scripts/setup_sglang_wheelhouse.sh
	scripts/part.sh molecule

fleet: setup
	scripts/part.sh fleet

bench: setup
	.venv/bin/python bench/readiness_latency.py
	.venv/bin/python bench/deploy_time.py
	.venv/bin/python bench/fleet_time.py
	.venv/bin/python bench/guard_bounds.py
	scripts/setup_aiperf.sh
	.venv/bin/python bench/benchmark_model.py
