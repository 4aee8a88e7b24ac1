"""A stand-in for the `ray` module, for the tests of the Ray fan-out where Ray is not
installed (make test): tasks run in this process, and every task submitted is recorded with
the options it asked for (`calls`: (function name, options)). As with Ray, a task's arguments
and its result go through pickle (a task whose arguments cannot be pickled fails)."""

from __future__ import annotations

import pickle
import types


class FakeRay(types.ModuleType):
    def __init__(self, gpus: float = 1, init_error: Exception | None = None,
                 task_error: Exception | None = None):
        super().__init__("ray")
        self.gpus, self.init_error, self.task_error = gpus, init_error, task_error
        self.calls: list[tuple[str, dict]] = []
        self.inits: list[dict] = []
        self._up = False

    def is_initialized(self) -> bool:
        return self._up

    def init(self, **kw) -> None:
        self.inits.append(kw)
        if self.init_error is not None:
            raise self.init_error
        self._up = True

    def shutdown(self) -> None:
        self._up = False

    def cluster_resources(self) -> dict:
        return {"CPU": 2.0, **({"GPU": float(self.gpus)} if self.gpus else {})}

    def remote(self, fn):
        return _Task(self, fn, {})

    def get(self, refs):
        return refs


class _Task:
    def __init__(self, ray: FakeRay, fn, options: dict):
        self.ray, self.fn, self.opts = ray, fn, options

    def options(self, **kw) -> _Task:
        return _Task(self.ray, self.fn, {**self.opts, **kw})

    def remote(self, *args):
        self.ray.calls.append((self.fn.__name__, self.opts))
        if self.ray.task_error is not None:
            raise self.ray.task_error
        return pickle.loads(pickle.dumps(self.fn(*pickle.loads(pickle.dumps(args)))))
