"""One worker of bench/fusion/run.sh: a model of N equal fp32 tensors (TOTAL elements in
all), no compute: each step pushes every tensor's fixed gradient (last first, as backward)
and waits for the answers. Worker 0 prints the median step (ms, after 10 warm-up steps) as
`RESULT {json}` on stderr, which lands in its log.

    tamp run CONFIG -- /usr/bin/python3 bench/fusion/client_steps.py N TOTAL STEPS
"""

import json
import statistics
import sys
import time

import numpy as np

import tamp

WARMUP_STEPS = 10


def main() -> None:
    tensors, total, steps = (int(arg) for arg in sys.argv[1:4])
    tamp.init()
    shapes = [(total // tensors,)] * tensors
    params = [np.zeros(shape, np.float32) for shape in shapes]
    grads = [np.random.RandomState(i).randn(*shape).astype(np.float32) * 1e-3
             for i, shape in enumerate(shapes)]
    client = tamp.Client([(f"t{i}", shape) for i, shape in enumerate(shapes)],
                         steps_per_epoch=steps, total_steps=steps)
    step = client.start(params)
    times = []
    while step < client.total_steps:
        began = time.perf_counter()
        client.begin_step(step, params)
        for i in reversed(range(tensors)):
            client.push(i, grads[i])
        client.wait(params)
        times.append((time.perf_counter() - began) * 1e3)
        step += 1
    client.close()
    if tamp.rank() == 0:
        print("RESULT " + json.dumps({"tensors": tensors, "elements": total,
                                      "step_ms": statistics.median(times[WARMUP_STEPS:])}),
              file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
