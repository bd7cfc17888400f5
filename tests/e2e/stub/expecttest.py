"""A stand-in for the `expecttest` package, which Debian does not ship and
torch.testing._internal imports: its op_db needs only these two names."""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
