"""A runner method callable on the class, as ``agents.Runner``'s are, or on an instance.

``agents.Runner.run(agent, input)`` is a class method, so that is what every SDK
user writes; ``GuardedRunner.run(agent, input)`` must work the same.  On the class
the method runs on a default-configured runner (the mode from the environment per
run, no telemetry); on an instance, on that instance's configuration.  Either way
the bound callable has the method's own typed parameters (``ParamSpec``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


class either(Generic[P, R]):  # lower case: a decorator, like classmethod
    """Decorate a method so it binds to the instance, or to ``owner()`` on the class."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self._method = method
        self.__doc__ = method.__doc__
        self.__name__ = method.__name__
        parameters = list(inspect.signature(method).parameters.values())[1:]
        self._signature = inspect.signature(method).replace(parameters=parameters)

    def __get__(self, instance: object | None, owner: type[Any]) -> Callable[P, R]:
        runner = instance if instance is not None else owner()
        method = self._method
        if inspect.iscoroutinefunction(method):  # stays a coroutine function, as the SDK's

            async def awaited(*args: Any, **kwargs: Any) -> Any:
                return await method(runner, *args, **kwargs)

            bound = cast(Callable[P, R], awaited)
        else:

            def called(*args: P.args, **kwargs: P.kwargs) -> R:
                return method(runner, *args, **kwargs)

            bound = called
        functools.update_wrapper(bound, method)
        bound.__signature__ = self._signature  # type: ignore[attr-defined]
        return bound
