"""``stats.quadrature.gauss_legendre``: numpy's rule without LAPACK (a report's worker processes spun
for minutes in ``leggauss``'s eigenvalue call on a machine whose cores were busy)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from benchcheck.stats.quadrature import gauss_legendre


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 33, 64, 100])
def test_nodes_and_weights_equal_numpys_rule(n: int) -> None:
    nodes, weights = gauss_legendre(n)
    ref_nodes, ref_weights = np.polynomial.legendre.leggauss(n)
    assert np.allclose(nodes, ref_nodes, rtol=0, atol=1e-14)
    assert np.allclose(weights, ref_weights, rtol=0, atol=1e-13)


@pytest.mark.parametrize("n", [1, 4, 64])
def test_the_rule_integrates_every_polynomial_of_degree_below_2n_exactly(n: int) -> None:
    nodes, weights = gauss_legendre(n)
    for degree in range(2 * n):
        exact = 0.0 if degree % 2 else 2.0 / (degree + 1)  # the integral of x^d over [-1, 1]
        assert abs(float(np.sum(weights * nodes ** degree)) - exact) < 1e-13, degree


def test_a_rule_of_no_node_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one node"):
        gauss_legendre(0)


def test_importing_the_confidence_module_calls_no_lapack() -> None:
    """The module's nodes come at import: with numpy's eigenvalue routines broken, it still imports."""
    code = ("import numpy.linalg as la\n"
            "def broken(*a, **k):\n    raise SystemExit('LAPACK called')\n"
            "la.eigvalsh = la.eigh = la.eigvals = la.eig = broken\n"
            "import benchcheck.stats.confidence\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
