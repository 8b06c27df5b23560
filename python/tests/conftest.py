import numpy as np
import pytest


@pytest.fixture
def rng():
    """Fresh, seeded random inputs for each test."""
    return np.random.default_rng(20261130)
