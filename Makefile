# The two commands of the README, plus their parts.
.PHONY: setup demo test lint unit sanity integration molecule bench

setup:
	scripts/setup.sh

demo:
	scripts/demo.sh

test:
	scripts/test.sh

bench: setup
	.venv/bin/python bench/readiness_latency.py
	.venv/bin/python bench/deploy_time.py
	.venv/bin/python bench/fleet_time.py
	scripts/setup_aiperf.sh
	.venv/bin/python bench/benchmark_model.py
