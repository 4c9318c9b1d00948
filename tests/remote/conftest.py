import pytest

pytestmark = pytest.mark.kernel
