"""Test doubles shared by the budget tests: data that must not be read."""


class Untouchable:
    """Data that must not be read: reading its values or its length fails the test."""

    def __array__(self, *args, **kwargs):
        raise AssertionError("the data was read")

    def __len__(self):
        raise AssertionError("the data was read")


class Unreadable(Untouchable):
    """Data whose shape is public but whose values must not be read."""

    def __init__(self, shape):
        self.shape = tuple(shape)

    def __len__(self):
        return self.shape[0]
