"""Did the roll drain each replica out of the router, `serial` replicas at a time, one batch after the other?

stdin: {"samples": [[monotonic seconds, [worker URLs the router lists]], ...] (an unanswered sample is
        [monotonic seconds, null, the error]: a request the router failed, which fails the roll),
        "replicas": [replica names], "serial": the roll's k26_serial (the batches are the replicas in the order
        they stopped, `serial` at a time: the run, not the inventory, decides the order),
        "identities": {name: {"InactiveEnterTimestampMonotonic": usec, "ExecMainStartTimestampMonotonic": usec}},
        "url": "http://{name}:30000" (a replica's worker URL)}
The timestamps are systemd's for the replica's restart (its stop and its new process's start), on the same
CLOCK_MONOTONIC as the samples: the containers share the host's kernel.

Checks, for each replica: the router lists it in no sample from its stop until 2 s after its new process started
(its port is still closed then: weights load for 2 s), and there is such a sample; it is listed again before the
next batch stops; the replicas of a batch were down together; a batch stops only after the one before it started
again; the last batch is listed in the last sample. Prints what it saw; exits 1 with every violation.
"""
import json
import sys

LOADING_SECONDS = 2.0


def replica(data, name):
    identity = data["identities"][name]
    return {"name": name, "url": data["url"].format(name=name),
            "stopped": int(identity["InactiveEnterTimestampMonotonic"]) / 1e6,
            "started": int(identity["ExecMainStartTimestampMonotonic"]) / 1e6}


def check_replica(samples, one, next_stop):
    """Problems with one replica's restart: listed while away, no sample then, not listed again in time."""
    away = [urls for when, urls in samples if one["stopped"] <= when <= one["started"] + LOADING_SECONDS]
    listed = [urls for urls in away if one["url"] in urls]
    print("%s: out of the router from %.2f to %.2f: %d samples, %d listing it"
          % (one["name"], one["stopped"], one["started"] + LOADING_SECONDS, len(away), len(listed)))
    problems = []
    if not away:
        problems.append("%s: no sample of the router's workers while it restarted" % one["name"])
    if listed:
        problems.append("%s: the router listed it while it restarted" % one["name"])
    if not any(one["started"] < when < next_stop and one["url"] in urls for when, urls in samples):
        problems.append("%s: not listed again before the next batch stopped" % one["name"])
    return problems


def check_batches(batches):
    """Problems with the order: a batch down together, and only after the previous one started again."""
    problems = []
    for index, batch in enumerate(batches):
        if max(one["stopped"] for one in batch) > min(one["started"] for one in batch) + LOADING_SECONDS:
            problems.append("%s were not down together" % ", ".join(one["name"] for one in batch))
        if index:
            before = batches[index - 1]
            if min(one["stopped"] for one in batch) <= max(one["started"] for one in before):
                problems.append("%s stopped before %s had started again" % (
                    ", ".join(one["name"] for one in batch), ", ".join(one["name"] for one in before)))
    return problems


def unanswered(raw):
    """Problems with the samples the router did not answer: each is a request it failed during the roll."""
    failed = [sample for sample in raw if sample[1] is None]
    if not failed:
        return []
    first = failed[0]
    return ["the router did not answer %d of %d samples (the first at %.2f: %s)"
            % (len(failed), len(raw), first[0], first[2] if len(first) > 2 else "no answer")]


def main():
    data = json.load(sys.stdin)
    problems = unanswered(data["samples"])
    samples = sorted((sample[0], set(sample[1])) for sample in data["samples"] if sample[1] is not None)
    stopped = sorted((replica(data, name) for name in data["replicas"]), key=lambda one: one["stopped"])
    batches = [stopped[index:index + data["serial"]] for index in range(0, len(stopped), data["serial"])]
    problems += check_batches(batches)
    for index, batch in enumerate(batches):
        next_stop = min(one["stopped"] for one in batches[index + 1]) if index + 1 < len(batches) else float("inf")
        for one in batch:
            problems += check_replica(samples, one, next_stop)
    if samples and batches and not all(one["url"] in samples[-1][1] for one in batches[-1]):
        problems.append("the last batch is not listed in the last sample")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("drained and rolled batch by batch, in order: %s"
          % " then ".join("+".join(one["name"] for one in batch) for batch in batches))


if __name__ == "__main__":
    main()
