"""prometheus_text: the Prometheus text format (and OpenMetrics) read by its rules, and what reads /metrics with it:
sglang_router_workers.busy_requests (a replica's running and queued requests) and the replica guard's progress
marker (roles/sglang_service/files/replica_guard.py, run as installed: beside the module_utils it is given).

The texts of tests/fixtures/prometheus were written by SGLang 0.5.23's collectors and prometheus_client (its
README.md and record_metrics.py say how); each must read back to exactly what was written."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.k26.deploy.plugins.module_utils import prometheus_text as prom
from ansible_collections.k26.deploy.plugins.module_utils.sglang_router_workers import busy_requests

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "fixtures" / "prometheus"


def fixture(name):
    return (FIXTURES / name).read_bytes().decode("utf-8")


def in_order(samples):
    return sorted(samples, key=lambda sample: json.dumps(sample, sort_keys=True))


def read(text, malformed=None):
    """The samples as the fixtures' .json hold them: [name, labels, repr(value)], in one order."""
    return in_order([name, labels, repr(value)] for name, labels, value in prom.samples(text, malformed))


@pytest.mark.parametrize("name, ext", [
    ("sglang-0.5.23", "prom"), ("sglang-0.5.23", "openmetrics.txt"),
    ("prometheus-client-edges", "prom"), ("prometheus-client-edges", "openmetrics.txt"),
    ("prometheus-client-utf8", "prom"), ("prometheus-client-utf8", "openmetrics.txt"),
])
def test_written_texts_read_back_exactly(name, ext):
    expected = json.loads(fixture(name + ".json"))
    if name.startswith("sglang") and ext == "openmetrics.txt":
        # prometheus_client 0.26's OpenMetrics writer spells sglang:NAME as sglang_NAME on its sample lines
        expected = [[n.replace(":", "_"), labels, value] for n, labels, value in expected]
    malformed = []
    assert read(fixture("%s.%s" % (name, ext)), malformed) == in_order(expected)
    assert malformed == []  # every line of them, comments included, follows the format


def test_escapes_and_values_of_the_edge_cases():
    values = {labels["path"]: value for name, labels, value in prom.samples(fixture("prometheus-client-edges.prom"))
              if name == "k26_edge_value"}
    assert math.isnan(values["C:\\DIR\\FILE.TXT"])
    assert values['say "hi"'] == math.inf and values["one\ntwo"] == -math.inf
    assert values["a}b"] == 1.5e-300 and values['a,b="c"'] == 1e21 and values["x # y {z}"] == 123456789.0
    assert math.copysign(1.0, values["line\u2028separator"]) == -1.0 and values["tab\tin it"] == 0.1
    assert values[" spaced "] == 7 and values[""] == 42 and values["\\"] == 3


SPEC = (
    "# a comment that is neither HELP nor TYPE\n"
    "# HELP http_requests_total The total, with an escaped \\\\ and a \\n.\n"
    "#\tTYPE\thttp_requests_total\tcounter\n"
    "\n"
    "   \t\n"
    "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
    "http_requests_total{method=\"post\",code=\"400\"}    3   1395066363000\n"
    "  \thttp_requests_total { method = \"get\" , code = \"200\" , } \t 12\t\n"
    "metric_without_timestamp_and_labels 12.47\n"
    "empty_labels{} -1.5e3\n"
    "something_weird{problem=\"division by zero\"} +Inf -3982045\n"
    "spellings{v=\"a\"} .5\n"
    "spellings{v=\"b\"} 5.\n"
    "spellings{v=\"c\"} -Infinity\n"
    "spellings{v=\"d\"} inf\n"
    "spellings{v=\"e\"} nan\n"
    "spellings{v=\"f\"} 1E-2\n"
    "colons:and_underscores_{v=\"g\"} 0\n"
    "{\"my.dotted.metric\", \"error.message\"=\"Not Found\"} 1\n"
    "{\"quoted.only\"} 2\n"
    "{\"quoted.comma\",} 3\n"
    "legacy_name{\"quoted label\"=\"v\",plain=\"w\"} 4\n"
    "om_counter_total{code=\"200\"} 2.0 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67 1520879602.890\n"
    "om_counter_total{code=\"500\"} 1 # {} 1\n"
    "# UNIT om_seconds seconds\n"
    "# EOF\n"
)


def test_the_formats_rules():
    malformed = []
    got = list(prom.samples(SPEC, malformed))
    assert malformed == []
    assert got[:3] == [("http_requests_total", {"method": "post", "code": "200"}, 1027.0),
                       ("http_requests_total", {"method": "post", "code": "400"}, 3.0),
                       ("http_requests_total", {"method": "get", "code": "200"}, 12.0)]
    values = {(name, json.dumps(labels, sort_keys=True)): value for name, labels, value in got}
    assert values[("metric_without_timestamp_and_labels", "{}")] == 12.47
    assert values[("empty_labels", "{}")] == -1500.0
    assert values[("something_weird", '{"problem": "division by zero"}')] == math.inf
    spelled = {labels["v"]: value for name, labels, value in got if name in ("spellings", "colons:and_underscores_")}
    assert spelled["a"] == 0.5 and spelled["b"] == 5.0 and spelled["c"] == -math.inf and spelled["d"] == math.inf
    assert math.isnan(spelled["e"]) and spelled["f"] == 0.01 and spelled["g"] == 0.0
    assert values[("my.dotted.metric", '{"error.message": "Not Found"}')] == 1.0
    assert values[("quoted.only", "{}")] == 2.0 and values[("quoted.comma", "{}")] == 3.0
    assert values[("legacy_name", '{"plain": "w", "quoted label": "v"}')] == 4.0
    assert values[("om_counter_total", '{"code": "200"}')] == 2.0
    assert values[("om_counter_total", '{"code": "500"}')] == 1.0
    assert len(got) == len(values) == 19


@pytest.mark.parametrize("line", [
    "metric",                               # no value
    "metric ",
    "metric 1 2 3",                         # a third token
    "metric 1x",
    "metric 1.0.0",
    "metric 1_000",                         # Python's float() takes these, Go's ParseFloat does not
    "metric 0x1p-2",
    "metric \u0661",                        # an Arabic-Indic digit
    "metric \uff13",                        # a full-width digit
    "metric +NaN",
    "metric 1 NaN",                         # a timestamp is a number
    "metric 1 99999999999999999999",       # past int64
    "metric\u00a01",                        # a no-break space is no blank
    "metric 1\r",                           # a CR line end
    "metric{a=\"b} 1",                      # unterminated
    "metric{a=\"b\\t\"} 1",                 # no such escape
    "metric{a=\"b\"\"} 1",
    "metric{a=\"b\",a=\"c\"} 1",            # a label twice
    "metric{,a=\"b\"} 1",                   # a leading comma
    "metric{a=\"b\",,} 1",
    "metric{a=b} 1",                        # unquoted
    "metric{a} 1",
    "metric{1a=\"b\"} 1",
    "metric{a-b=\"c\"} 1",
    "metric{a=\"b\"}} 1",
    "metric{a=\"b\" c=\"d\"} 1",             # no comma
    "1metric 1",
    "metric-name 1",
    "metric{a=\"b\"} 1 # not an exemplar",
    "metric{a=\"b\"} 1 # {trace_id=\"x\"}",  # an exemplar without its value
    "{a=\"b\"} 1",                          # no name at all
    "metric{\"again\"} 1",                  # a name twice
    "{\"a\",\"b\"} 1",
    "# TYPE metric",                        # TYPE wants a name and a type
    "# TYPE metric gauge extra",
    "# TYPE metric bogus",
    "# HELP",                               # HELP wants a name
    "# HELP 1bad doc",
    "# HELP metric C:\\DIR",                # a docstring escapes its backslashes
])
def test_a_line_off_the_format_is_malformed(line):
    with pytest.raises(prom.MalformedLine):
        prom.parse_line(line)
    good = "sglang:num_running_reqs 2\n"
    # the text's other lines still read: the line says nothing of them
    assert list(prom.samples(good + line + "\n" + good)) == [("sglang:num_running_reqs", {}, 2.0)] * 2


def test_a_text_cut_short_loses_its_unfinished_last_line():
    assert list(prom.samples("a 1\nb 12")) == [("a", {}, 1.0)]
    assert list(prom.samples("")) == [] and list(prom.samples(None)) == []


def test_a_malformed_line_is_reported_when_asked():
    malformed = []
    assert list(prom.samples("a 1\nb{ 2\nc 3", malformed=malformed)) == [("a", {}, 1.0)]
    assert [(number, line) for number, line, why in malformed] == [(2, "b{ 2"), (3, "c 3")]
    assert all(why for number, line, why in malformed)


# The replica's requests: what the old regular expression (a name, an optional {...} up to the first '}', a
# blank, a token) read wrong.
BUSY = "sglang:num_queue_reqs{model_name=\"kimi-k2.6\"} 1\n"


@pytest.mark.parametrize("line, running", [
    ('sglang:num_running_reqs{model_name="x} 7 "} 3\n', 3),          # old: 7, the token after the first '}'
    ('sglang:num_running_reqs{model_name="\\"} 9 \\""} 3\n', 3),     # an escaped quote; old: 9
    ('sglang:num_running_reqs{model_name="a}b"} 3\n', 3),            # old: not a sample, the gauge missed
    ('sglang:num_running_reqs{model_name="a,b=\\"c\\""} 3\n', 3),
    ('sglang:num_running_reqs{model_name="a\u2028b"} 3\n', 3),       # old: splitlines() broke the line in two
    ('  sglang:num_running_reqs 3\n', 3),                            # leading blanks; old: missed
    ('{"sglang:num_running_reqs",model_name="x"} 3\n', 3),           # a quoted name; old: missed
    ('sglang:num_running_reqs{model_name="x"} 3e0 1395066363000\n', 3),
    ('sglang_num_running_reqs{model_name="x"} 3.0 # {trace_id="}"} 1.0 1520879602.890\n', 3),  # OpenMetrics
])
def test_busy_requests_reads_what_the_regex_misread(line, running):
    assert busy_requests(BUSY + line) == running + 1


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_busy_requests_is_unknown_for_a_count_that_is_no_number(value):
    # old: int(nan) raised ValueError, int(inf) OverflowError
    assert busy_requests(BUSY + "sglang:num_running_reqs %s\n" % value) is None


def test_busy_requests_of_sglang_texts():
    assert busy_requests(fixture("sglang-0.5.23.prom")) == 5              # 3 + 1 running, 1 queued
    assert busy_requests(fixture("sglang-0.5.23.openmetrics.txt")) == 5
    # with priority scheduling the per-priority breakdown sits beside the total; old: 10
    assert busy_requests(fixture("sglang-0.5.23-priority.prom")) == 5


def test_busy_requests_reads_past_an_unreadable_line():
    assert busy_requests("garbage line\n" + BUSY + "sglang:num_running_reqs 2\nsglang:num_running_reqs 7") == 3


MARKER = """
import json, sys
import replica_guard
host = replica_guard.Host({'unit': 'k26.service', 'url': 'http://127.0.0.1:9'})
texts = json.load(sys.stdin)
markers = []
for text in texts:
    host._request = lambda path, body=None, timeout=5.0, auth=False, text=text: (200, text.encode('utf-8'))
    markers.append(host.progress())
json.dump(markers, sys.stdout)
"""


def progress_markers(folder, texts):
    proc = subprocess.run([sys.executable, "-c", MARKER], cwd=folder, input=json.dumps(texts),
                          capture_output=True, text=True, check=False, env={"PYTHONPATH": str(folder)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_guards_progress_marker(guard_dir):
    plain = "sglang:num_used_tokens{tp_rank=\"0\"} 4096\nsglang:num_running_reqs{tp_rank=\"0\"} 3\nother 1\n"
    texts = [
        plain,
        plain.replace("4096", "4096 1395066363000").replace(" 3\n", " 3 1395066364000\n"),  # timestamps
        plain.replace(" 4096", "\t4096").replace("sglang:num_running_reqs", "  sglang:num_running_reqs"),
        plain.replace("4096", "4097"),                                   # the scheduler ran a batch
        "sglang:num_used_tokens{path=\"a\u2028b\"} 4096\n",
        "# HELP other x\nother 1\n",                                     # no gauge of the scheduler
        fixture("sglang-0.5.23.prom"),
        fixture("sglang-0.5.23.openmetrics.txt"),
    ]
    markers = progress_markers(guard_dir, texts)
    assert markers[0] and markers[1] == markers[0]     # old: a new timestamp read as progress
    assert markers[2] == markers[0]                    # old: a tab after the name hid the gauge
    assert markers[3] != markers[0]
    assert markers[4] and "4096" in markers[4]         # old: the line broken in two, no gauge
    assert markers[5] is None
    assert markers[6] and markers[7] == markers[6]     # either spelling, sglang: or sglang_
