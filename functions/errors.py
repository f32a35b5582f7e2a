"""The root of every error the functions package raises (one ``except FunctionsError`` catches
them all; each also keeps the built-in class callers catch it by):

::

    FunctionsError
    ├── InvalidInput (ValueError)        an instance the model refuses: 400 with the reason
    ├── ModelError (RuntimeError)        the model failed on valid input: 500 from the function
    ├── EdgeError (ValueError)           a chain edge that cannot turn one answer into an input
    ├── NoEdge (KeyError)                no edge between two models
    ├── ProfileFormatError (ValueError)  a profile file off its schema, the key named
    ├── UnknownModel (KeyError)          no model kind of that name
    ├── ServerStartError (RuntimeError)  a function process that did not come up
    └── DeviceUnavailable (RuntimeError) a device the model cannot compute on (exit 2 at start)
"""

from __future__ import annotations

__all__ = ["FunctionsError"]


class FunctionsError(Exception):
    """Something the functions package refuses or failed at; the subclass says what."""
