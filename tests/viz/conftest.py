import pytest

from .frameworks import modulecraft_framework, torch_framework


@pytest.fixture(params=["torch", "modulecraft"])
def fw(request):
    """Each test that takes ``fw`` runs once on torch.nn and once on modulecraft.nn."""
    return torch_framework() if request.param == "torch" else modulecraft_framework()


@pytest.fixture
def torch_fw():
    return torch_framework()


@pytest.fixture
def modulecraft_fw():
    return modulecraft_framework()
