"""Student's t quantile in pure Python, so a run's summary needs no SciPy (0.26 s of imports).

``t_quantile(p, df)`` starts from Hill's approximation (G. W. Hill, "Algorithm 396: Student's
t-quantiles", CACM 13(10), 1970, 619-620; the form R's ``qt`` uses) and refines it by Newton steps
on the exact t CDF. That CDF is a regularized incomplete beta function (Abramowitz & Stegun 26.7.1,
26.5.27): for t > 0, P(T > t) = I_x(df/2, 1/2) / 2 with x = df / (df + t²), and
P(|T| < t) = I_y(1/2, df/2) with y = t² / (df + t²). I is evaluated by its continued fraction
(A&S 26.5.8, modified Lentz as in Numerical Recipes' ``betacf``), choosing the side that both
converges and leaves the small probability uncancelled. ln B(df/2, 1/2) comes from ``math.lgamma``
for small df and from the difference of two Stirling series for large df, where two lgamma values
near 10^6 would lose ten digits. For large df (≥ 1e5; ≥ 1e4 unless p is beyond 1e-15) the
fraction loses digits near its switch-over (~1e-12 at df = 1e6), and the expansion about the
normal (A&S 26.7.5) is exact to double precision instead. The result agrees with
``scipy.stats.t.ppf`` to about 1e-13 relative, and inverts the CDF down to p = 1e-300, where SciPy
returns inf or the wrong value (tests/test_summary_pure.py).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["t_quantile"]

_EPS = 1e-15
_TINY = 1e-300
_MAX_TERMS = 100_000
#: Bernoulli terms of Stirling's series: ln Γ(z) = (z - ½) ln z - z + ½ ln 2π + Σ c_k / z^(2k-1).
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom (df ≥ 1, integer or real;
    ``math.inf`` is the normal). Raises ValueError outside 0 < p < 1 or for df < 1."""
    p, df = float(p), float(df)
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must lie strictly between 0 and 1, got {p!r}")
    if not df >= 1.0:  # also NaN
        raise ValueError(f"t_quantile: df must be at least 1, got {df!r}")
    if p == 0.5:
        return 0.0
    if math.isinf(df):
        return NormalDist().inv_cdf(p)
    q = min(p, 1.0 - p)  # the smaller tail; the quantile of q is -t
    large = df >= 1e5 or (df >= 1e4 and q >= 1e-15)  # where the expansion is exact (module docstring)
    t = _expansion(q, df) if large else _refine(_start(q, df), q, df)
    return t if p > 0.5 else -t


def _start(q: float, df: float) -> float:
    """Where Newton starts: Hill's value, or in tails so far out that it overflows (q ~ 1e-200 at
    df near 1), the tail's leading term P(T > t) ≈ (df/t²)^(df/2) / (df B(df/2, 1/2))."""
    try:
        t = _hill(2.0 * q, df)
    except (ZeroDivisionError, OverflowError):
        t = math.inf
    if 0.0 < t < 1e150:
        return t
    log_x = 2.0 * (math.log(df * q) + _log_beta_half(df / 2.0)) / df
    return math.exp((math.log(df) - log_x) / 2.0)


def _hill(two_tail: float, n: float) -> float:
    """Hill's |t| with two-tailed probability ``two_tail``: a start within about 1e-4 relative."""
    if n == 1.0:
        return 1.0 / math.tan(two_tail * math.pi / 2)
    if n == 2.0:
        return math.sqrt(2.0 / (two_tail * (2.0 - two_tail)) - 2.0)
    a = 1.0 / (n - 0.5)
    b = 48.0 / (a * a)
    c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36
    d = ((94.5 / (b + c) - 3.0) / b + 1.0) * math.sqrt(a * math.pi / 2) * n
    y = (d * two_tail) ** (2.0 / n)
    if y > 0.05 + a:  # asymptotic inverse expansion about the normal
        x = NormalDist().inv_cdf(0.5 * two_tail)
        y = x * x
        if n < 5:
            c += 0.3 * (n - 4.5) * (x + 0.6)
        c = (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b + c
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x
        y = math.expm1(a * y * y)
    else:
        y = ((1.0 / (((n + 6.0) / (n * y) - 0.089 * d - 0.822) * (n + 2.0) * 3.0) + 0.5 / (n + 4.0)) * y - 1.0) * (n + 1.0) / (n + 2.0) + 1.0 / y
    return math.sqrt(n * y)


def _expansion(q: float, n: float) -> float:
    """|t| for the upper tail ``q`` by the expansion about the normal quantile x in powers of 1/n
    (Fisher 1925; A&S 26.7.5, terms up to n^-4)."""
    x = -NormalDist().inv_cdf(q)
    x2 = x * x
    g1 = (x2 + 1.0) * x / 4.0
    g2 = ((5.0 * x2 + 16.0) * x2 + 3.0) * x / 96.0
    g3 = (((3.0 * x2 + 19.0) * x2 + 17.0) * x2 - 15.0) * x / 384.0
    g4 = ((((79.0 * x2 + 776.0) * x2 + 1482.0) * x2 - 1920.0) * x2 - 945.0) * x / 92160.0
    return x + (g1 + (g2 + (g3 + g4 / n) / n) / n) / n


def _refine(t: float, q: float, df: float) -> float:
    """Newton steps from ``t`` > 0 to the root of P(T > t) = q.

    Beyond the quartiles the steps are taken on ln P(T > t) against ln t, which is nearly linear
    in the tails (exactly so for df = 1) and keeps densities that underflow (q ~ 1e-300) out of
    the arithmetic; between them, on P(|T| < t) = 1 - 2q, which does not cancel near the median.
    """
    log_norm = -0.5 * math.log(df) - _log_beta_half(df / 2.0)  # ln of the density at 0
    last = math.inf
    for _ in range(100):
        log_density = log_norm - (df + 1.0) / 2.0 * _log1p_t2(t, df)
        if q > 0.25:  # d/dt P(|T| < t) = 2 f(t)
            step = (1.0 - 2.0 * q - _central(t, df)) / (2.0 * math.exp(log_density))
            new = t + step
            while new <= 0.0:
                step /= 2.0
                new = t + step
        else:  # d ln P(T > t) / d ln t = -t f(t) / P(T > t)
            log_upper = _log_upper(t, df)
            step = (log_upper - math.log(q)) * math.exp(log_upper - log_density) / t
            new = t * math.exp(step)
            step = new - t
        # Newton converges quadratically: after a step of 1e-12 the error is ~1e-24, and a step no
        # smaller than the last is the CDF's own rounding, not the distance to the root.
        if abs(step) <= 1e-12 * new or abs(step) >= last:
            return new
        t, last = new, abs(step)
    return t


def _log1p_t2(t: float, df: float) -> float:
    """ln(1 + t²/df), without overflow for huge t."""
    if t < 1e150:
        return math.log1p(t * t / df)
    return 2.0 * math.log(t) - math.log(df) + math.log1p(df / t / t)


def _logs(t: float, df: float) -> tuple[float, float, float, float]:
    """x = df/(df+t²), y = t²/(df+t²) and their logs, each computed without cancellation."""
    lp = _log1p_t2(t, df)
    log_x = -lp
    log_y = 2.0 * math.log(t) - math.log(df) - lp
    return math.exp(log_x), math.exp(log_y), log_x, log_y


def _log_upper(t: float, df: float) -> float:
    """ln P(T > t) for t > 0: ln(I_x(df/2, 1/2) / 2)."""
    x, y, log_x, log_y = _logs(t, df)
    a, b = df / 2.0, 0.5
    log_front = a * log_x + b * log_y - _log_beta_half(a)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.log(0.5 * _betacf(a, b, x, y) / a) + log_front
    # I_x(a, b) = 1 - I_y(b, a): only where t² < 3 (P(T > t) > 0.04), so the subtraction loses little
    return math.log(0.5) + math.log1p(-math.exp(log_front) * _betacf(b, a, y, x) / b)


def _central(t: float, df: float) -> float:
    """P(|T| < t) for t > 0: I_y(1/2, df/2)."""
    x, y, log_x, log_y = _logs(t, df)
    a, b = 0.5, df / 2.0
    front = math.exp(a * log_y + b * log_x - _log_beta_half(b))
    if y < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, y, x) / a
    return 1.0 - front * _betacf(b, a, x, y) / b


def _betacf(a: float, b: float, x: float, y: float) -> float:
    """The continued fraction of I_x(a, b) (A&S 26.5.8), by the modified Lentz method."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    # 1 - (a+b)x/(a+1); for x near 1 written with y = 1 - x, where it would cancel
    d = 1.0 - qab * x / qap if x < 0.5 else ((1.0 - b) + qab * y) / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            if abs(c) < _TINY:
                c = _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"incomplete beta: continued fraction for a={a}, b={b}, x={x} did not converge")


def _log_beta_half(s: float) -> float:
    """ln B(s, ½). For s ≥ 10, ln Γ(s + ½) - ln Γ(s) comes from Stirling's series in a form with no
    large terms to cancel: ½ ln s - ½ + s·ln(1 + 1/(2s)) + [series(s + ½) - series(s)]."""
    if s < 10.0:
        return math.lgamma(s) + math.lgamma(0.5) - math.lgamma(s + 0.5)
    diff = 0.5 * math.log(s) - 0.5 + s * math.log1p(0.5 / s) + _stirling(s + 0.5) - _stirling(s)
    return math.lgamma(0.5) - diff


def _stirling(z: float) -> float:
    inv, inv2 = 1.0 / z, 1.0 / (z * z)
    total = 0.0
    for coefficient in reversed(_STIRLING):
        total = total * inv2 + coefficient
    return total * inv
