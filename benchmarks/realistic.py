"""A generated, realistic 150-code-cell data-science notebook.

``python -m benchmarks.realistic PATH`` writes it.

No third-party notebook of that size that runs offline on numpy, pandas and matplotlib alone
could be found in a permissively licensed package, so the warm-up benchmark runs this one: a
sales analysis as people write them, top to bottom — load (from a seeded generator, no
download), cleaning, features, many small group-bys and checks, a few functions, plots, a
hand-rolled regression and a summary — interleaved with Markdown. Cells are small and many,
which is what exposes a per-cell cost; deterministic, so every run does the same work.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

SETUP = [
    "import math\nimport json\nfrom collections import Counter, defaultdict",
    "import numpy as np\nimport pandas as pd",
    "import matplotlib\nimport matplotlib.pyplot as plt",
    "pd.set_option('display.max_columns', 20)\nrng = np.random.default_rng(42)",
    "N = 60_000\nREGIONS = ['north', 'south', 'east', 'west', 'central']\n"
    "PRODUCTS = [f'p{i:02d}' for i in range(40)]",
    "dates = pd.date_range('2022-01-01', periods=730, freq='D')\nlen(dates)",
    (
        "raw = pd.DataFrame({\n"
        "    'date': rng.choice(dates, N),\n"
        "    'region': rng.choice(REGIONS, N, p=[0.3, 0.25, 0.2, 0.15, 0.1]),\n"
        "    'product': rng.choice(PRODUCTS, N),\n"
        "    'units': rng.integers(1, 20, N),\n"
        "    'unit_price': np.round(rng.gamma(2.0, 15.0, N), 2),\n"
        "    'discount': np.round(rng.choice([0, 0, 0, 0.05, 0.1, 0.2], N), 2),\n"
        "    'customer': rng.integers(1, 5_000, N),\n"
        "})\n"
        "raw.loc[rng.choice(N, 600, replace=False), 'unit_price'] = np.nan\n"
        "raw.loc[rng.choice(N, 300, replace=False), 'region'] = None"
    ),
    "raw.head()",
    "raw.shape",
    "raw.dtypes",
    "raw.isna().sum()",
    "raw.describe()",
]

CLEANING = [
    "clean = raw.dropna(subset=['unit_price']).copy()\n"
    "clean['region'] = clean['region'].fillna('unknown')",
    "clean['revenue'] = clean['units'] * clean['unit_price'] * (1 - clean['discount'])",
    "clean['month'] = clean['date'].dt.to_period('M').astype(str)",
    "clean['weekday'] = clean['date'].dt.day_name()",
    "clean['quarter'] = clean['date'].dt.quarter",
    "clean['year'] = clean['date'].dt.year",
    "clean = clean.sort_values('date').reset_index(drop=True)\nclean.tail(3)",
    "assert (clean['revenue'] >= 0).all()\nlen(clean)",
]

FUNCTIONS = [
    "def share(series):\n    total = series.sum()\n    return (series / total).round(4)",
    "def top_n(frame, col, n=5):\n    return frame.groupby(col)['revenue'].sum().nlargest(n)",
    "def zscore(s):\n    return (s - s.mean()) / s.std(ddof=0)",
    (
        "def summarize(frame, by):\n"
        "    g = frame.groupby(by)\n"
        "    return pd.DataFrame({'orders': g.size(), 'units': g['units'].sum(), 'revenue': "
        "g['revenue'].sum().round(2)})"
    ),
    "def pct_change_table(s):\n    return pd.DataFrame({'value': s, 'pct': "
    "s.pct_change().mul(100).round(1)})",
]


def analysis_cells() -> list[str]:
    cells: list[str] = []
    cells += [
        "by_region = summarize(clean, 'region')\nby_region",
        "share(by_region['revenue'])",
        "by_product = summarize(clean, 'product')\nby_product.head(10)",
        "top_n(clean, 'product', 10)",
        "by_month = clean.groupby('month')['revenue'].sum()\nby_month.tail(6)",
        "pct_change_table(by_month).tail(12)",
        "by_weekday = clean.groupby('weekday')['revenue'].mean().round(2)\nby_weekday",
        "pivot = clean.pivot_table(index='region', columns='quarter', values='revenue', "
        "aggfunc='sum').round(0)\npivot",
        "pivot.div(pivot.sum(axis=1), axis=0).round(3)",
        "discounted = clean[clean['discount'] > 0]\nlen(discounted) / len(clean)",
        "discounted.groupby('discount')['units'].mean()",
        "customers = clean.groupby('customer').agg(orders=('revenue', 'size'), spend=('revenue', "
        "'sum'))\ncustomers.describe()",
        "customers['segment'] = pd.qcut(customers['spend'], 4, labels=['low', 'mid', 'high', "
        "'top'])",
        "customers['segment'].value_counts()",
        "repeat = (customers['orders'] > 15).mean()\nround(repeat, 3)",
        "clean = clean.merge(customers[['segment']], left_on='customer', right_index=True, "
        "how='left')",
        "summarize(clean, 'segment')",
        "clean.groupby(['segment', 'region'], observed=True)['revenue'].sum().unstack().round(0)",
    ]
    # The middle of a long analysis: many small, similar checks, one per product family.
    for i in range(0, 40, 2):
        p = f"p{i:02d}"
        cells.append(
            f"sub_{p} = clean[clean['product'] == '{p}']\n"
            f"sub_{p}['revenue'].describe()[['mean', '50%', 'max']].round(2)"
        )
        cells.append(f"zs_{p} = zscore(sub_{p}['revenue'])\nint((zs_{p}.abs() > 3).sum())")
    cells += [
        "outliers = clean[zscore(clean['revenue']).abs() > 3]\nlen(outliers)",
        "clean_no_out = clean.drop(outliers.index)\nclean_no_out['revenue'].describe()",
        "weekly = clean.set_index('date')['revenue'].resample('W').sum()\nweekly.head()",
        "rolling = weekly.rolling(4).mean()\nrolling.dropna().tail()",
        "season = clean.groupby(clean['date'].dt.month)['revenue'].mean()\nseason.round(1)",
        "counts = Counter(clean['product'])\ncounts.most_common(5)",
        "pairs = defaultdict(float)\nfor r, p, v in clean[['region', 'product', "
        "'revenue']].itertuples(index=False):\n    pairs[(r, p)] += v\nlen(pairs)",
        "best_pair = max(pairs, key=pairs.get)\nbest_pair, round(pairs[best_pair], 2)",
        "X = np.column_stack([np.ones(len(clean)), clean['units'], clean['discount']])\n"
        "y = clean['revenue'].to_numpy()",
        "beta, *_ = np.linalg.lstsq(X, y, rcond=None)\nbeta.round(3)",
        "pred = X @ beta\nresid = y - pred\nround(float(np.sqrt((resid ** 2).mean())), 3)",
        "r2 = 1 - (resid ** 2).sum() / ((y - y.mean()) ** 2).sum()\nround(float(r2), 4)",
        "price_bins = pd.cut(clean['unit_price'], [0, 10, 20, 40, 80, 1000])\n"
        "clean.groupby(price_bins, observed=True)['units'].mean().round(2)",
        "elasticity = clean.groupby('product').apply(lambda g: np.corrcoef(g['unit_price'], "
        "g['units'])[0, 1], include_groups=False)\nelasticity.describe()",
        "corr = clean[['units', 'unit_price', 'discount', 'revenue']].corr().round(3)\ncorr",
    ]
    return cells


PLOTS = [
    "fig, ax = plt.subplots(figsize=(6, 3))\nby_month.plot(ax=ax)\n"
    "ax.set_title('revenue by month')\nplt.show()",
    "fig, ax = plt.subplots(figsize=(5, 3))\nby_region['revenue'].sort_values().plot.barh(ax=ax)\n"
    "plt.show()",
    "fig, ax = plt.subplots(figsize=(5, 3))\n"
    "clean['revenue'].clip(upper=500).hist(bins=50, ax=ax)\nplt.show()",
    "fig, ax = plt.subplots(figsize=(6, 3))\nweekly.plot(ax=ax, alpha=0.5)\nrolling.plot(ax=ax)\n"
    "plt.show()",
    "fig, ax = plt.subplots(figsize=(4, 4))\nax.scatter(pred[:2000], y[:2000], s=2)\nplt.show()",
]

REPORT = [
    "report = {\n    'rows': int(len(clean)),\n"
    "    'revenue': round(float(clean['revenue'].sum()), 2),\n"
    "    'best_region': by_region['revenue'].idxmax(),\n    'r2': round(float(r2), 4),\n}",
    "print(json.dumps(report, indent=2))",
    "top_customers = customers.nlargest(10, 'spend')\ntop_customers",
    "math.isclose(report['revenue'], clean['revenue'].sum(), rel_tol=1e-9)",
]


def code_cells(count: int = 150) -> list[str]:
    """The first ``count`` code cells: past the written ones, the small follow-up checks a long
    notebook accumulates (150 in all by default; any count for the plan-scale scenario)."""
    cells = SETUP + CLEANING + FUNCTIONS + analysis_cells() + PLOTS + REPORT
    k = 0
    while len(cells) < max(count, 150):
        col = ("units", "unit_price", "revenue", "discount")[k % 4]
        cells.append(
            f"check_{k} = float(clean[{col!r}].quantile({0.05 + 0.9 * (k % 10) / 10:.2f}))\n"
            f"check_{k}"
        )
        k += 1
    return cells[:count]


def build(path: Path, cells_count: int = 150) -> Path:
    """The notebook's first ``cells_count`` code cells (a prefix runs on its own) at ``path``."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    cells = []
    for i, src in enumerate(code_cells(cells_count)):
        if i % 6 == 0:
            cells.append(nbformat.v4.new_markdown_cell(f"## Step {i // 6 + 1}", id=f"md{i:03d}"))
        cells.append(nbformat.v4.new_code_cell(src, id=f"cell{i:03d}"))
    nb.cells = cells
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "sales_analysis.ipynb")))
