"""The simulator's log lines (log.py): SGLang's and uvicorn's shapes on stderr, filtered by --log-level."""
import io
import re

from sglang_simulator import log

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def test_sglangs_line_with_its_rank_and_an_error_label():
    stream = io.StringIO()
    logger = log.Log("info", stream)
    logger.info("Load weight begin. avail mem=93.72 GB", rank=" PP0 TP0")
    logger.error("Warmup request failed")
    first, second = stream.getvalue().splitlines()
    assert re.fullmatch(rf"\[{STAMP} PP0 TP0\] Load weight begin\. avail mem=93\.72 GB", first)
    assert re.fullmatch(rf"\[{STAMP}\] ERROR: Warmup request failed", second)


def test_uvicorns_line():
    stream = io.StringIO()
    log.Log("info", stream).uvicorn("Started server process [42]")
    assert re.fullmatch(rf"\[{STAMP}\] INFO:     Started server process \[42\]\n", stream.getvalue())


def test_the_level_filters_and_an_unknown_level_is_info():
    stream = io.StringIO()
    logger = log.Log("warning", stream)
    logger.info("not shown")
    logger.line("a probe", "debug")
    logger.warning("shown")
    assert stream.getvalue().count("\n") == 1 and "shown" in stream.getvalue()
    assert log.Log("chatty").threshold == log.LOG_LEVELS["info"]
    assert log.Log("DEBUG").enabled("debug")


def test_raw_text_is_written_as_it_is_with_one_newline():
    stream = io.StringIO()
    logger = log.Log("info", stream)
    logger.raw("Capturing batches (bs=8 avail_mem=10.00 GB):  50%| 1/2\n")
    logger.raw("Traceback (most recent call last):\nRuntimeError: x")
    assert stream.getvalue() == ("Capturing batches (bs=8 avail_mem=10.00 GB):  50%| 1/2\n"
                                 "Traceback (most recent call last):\nRuntimeError: x\n")
