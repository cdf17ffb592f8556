"""Dataset loaders: scikit-learn's bundled data and verified offline copies
of public datasets (UCI Adult, Bank Marketing, Wine Quality, Drug Consumption, Appliances Energy,
COIL 2000, Bike Sharing; Location; AT&T/Olivetti faces), read from ``$PRIVFL_DATA_DIR``, one
sub-folder per dataset with the original files as published.

Nothing is downloaded at run time. A missing file raises :class:`DatasetNotFoundError`
naming the path and the environment variable that overrides the data directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray, Int8Array
from privfl.errors import InputError

DATA_ENV = "PRIVFL_DATA_DIR"


class DatasetNotFoundError(InputError):
    """A dataset file is missing."""


def data_dir() -> Path:
    """``$PRIVFL_DATA_DIR`` or the ``shared/data`` folder next to the repository."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return Path("shared") / "data"


def data_file(*parts: str) -> Path:
    path = data_dir().joinpath(*parts)
    if not path.is_file():
        raise DatasetNotFoundError(
            f"dataset file {path} not found; set {DATA_ENV} to the folder holding the "
            "privfl datasets (one sub-folder per dataset, the original files as published)"
        )
    return path


def breast_cancer_scores(seed: int = 0, test_fraction: float = 0.5) -> tuple[FloatArray, Int8Array]:
    """Scores of a logistic-regression model on the held-out part of scikit-learn's bundled
    Wisconsin breast-cancer data (569 samples): (test scores in [0, 1], test labels)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=1000))
    model.fit(xtr, ytr)
    return model.predict_proba(xte)[:, 1].astype(np.float64), yte.astype(np.int8)


def check_party_names(names: Any, what: str = "party", minimum: int = 2) -> list[str]:
    """The one rule for party names, wherever they come from (``--parties a,b``, a party
    column, a provisioning call): at least ``minimum``, none empty, none with surrounding
    whitespace, all distinct. ``site-a`` and ``site-a `` would otherwise name one party in
    one entry point and two in another, so such a pair is refused rather than merged."""
    out = [str(n) for n in names]
    if any(not n.strip() for n in out):
        raise InputError(f"a {what} name is empty (got {out!r}); give every {what} a name")
    padded = [n for n in out if n != n.strip()]
    if padded:
        raise InputError(
            f"{what} names {padded!r} start or end with whitespace; remove it (names are "
            "compared exactly)"
        )
    if len(out) < minimum:
        raise InputError(f"need at least {minimum} {what} names, got {out!r}")
    dupes = sorted({n for n in out if out.count(n) > 1})
    if dupes:
        raise InputError(f"{what} names must be distinct; repeated: {dupes!r}")
    return out


def typed_pos_label(column: Any, pos_label: str | None) -> Any:
    """A ``--pos-label`` given on the command line (a string) as a value of a table's label
    column: a number when the column is numeric (``--pos-label 1`` matches ``1`` and ``1.0``),
    a bool when the column is boolean (``true``/``false``, any case, or ``1``/``0``), else the
    string itself. ``None`` stays ``None`` (0/1 and -1/1 labels need none)."""
    if pos_label is None or getattr(column, "dtype", None) is None:
        return pos_label
    if column.dtype.kind == "b":
        named = {"true": True, "1": True, "false": False, "0": False}.get(pos_label.lower())
        if named is None:
            raise InputError(
                f"--pos-label {pos_label!r}: the labels are true/false, so pass true or false"
            )
        return named
    if column.dtype.kind in "iuf":
        try:
            return float(pos_label)
        except ValueError:
            raise InputError(
                f"--pos-label {pos_label!r} is not a number but the labels are numeric"
            ) from None
    return pos_label


def check_seed(seed: object, what: str = "seed") -> int:
    """``seed`` as an int: a non-negative integer (not a bool, not a float), else InputError."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"{what} must be a non-negative integer, got {seed!r}")
    return int(seed)


def deal(
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    parties: int,
    seed: int = 0,
    *,
    iid: bool = True,
) -> list[tuple[FloatArray, Int8Array]]:
    """Rows dealt to ``parties`` parties as evenly as possible (sizes differ by at most one).

    IID (default): a random deal (a permutation seeded by ``seed``). Non-IID (``iid=False``,
    DPAUC's skewed split): contiguous blocks after a stable sort by score, so party 0 holds the
    lowest scores; ``seed`` is then unused."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    raw = np.asarray(labels).ravel()
    if raw.dtype.kind not in "biuf":
        raise InputError(f"deal takes numeric labels (0/1 or -1/1), got {raw.dtype} values")
    with np.errstate(invalid="ignore"):
        y = raw.astype(np.int8)
    changed = np.flatnonzero(y != raw)
    if changed.size:  # 256 -> 0 and 0.5 -> 0 would silently relabel rows
        row = int(changed[0])
        value = raw[row].item()
        raise InputError(f"labels must be small integers (0/1 or -1/1); row {row} is {value!r}")
    check_seed(seed)
    if isinstance(parties, bool) or not isinstance(parties, int | np.integer) or parties < 1:
        raise InputError(f"the number of parties must be an integer >= 1, got {parties!r}")
    if s.size != y.size:
        raise InputError(f"{s.size} scores but {y.size} labels")
    if parties > s.size:
        raise InputError(f"cannot deal {s.size} rows to {parties} parties (each needs a row)")
    rng = np.random.default_rng(seed)  # not secret: a data split
    order = rng.permutation(s.size) if iid else np.argsort(s, kind="stable")
    return [(s[idx], y[idx]) for idx in np.array_split(order, int(parties))]


def read_table(path: str | Path) -> Any:
    """Read a CSV or Parquet file into a pandas DataFrame (clear error otherwise)."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p} is a directory, not a file; give the table's file path")
    if not p.is_file():
        raise InputError(f"file not found: {p}")
    suffixes = "".join(p.suffixes).lower()
    try:
        if suffixes.endswith((".parquet", ".pq")):
            return pd.read_parquet(p)
        if suffixes.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(p)
    except Exception as exc:
        raise InputError(f"cannot read {p}: {exc}") from exc
    raise InputError(f"{p}: unsupported format (use .csv, .csv.gz or .parquet)")


ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
    "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
    "hours_per_week", "native_country", "income",
]  # fmt: skip
ADULT_CATEGORICAL = [
    "workclass", "education", "marital_status", "occupation", "relationship", "race", "sex",
    "native_country",
]  # fmt: skip


def load_adult(part: str = "train") -> Any:
    """UCI Adult as a DataFrame (``part`` = "train" or "test"), ``income`` as 0/1 (>50K = 1).

    Reads ``adult/adult.data.gz`` / ``adult.test.gz`` as shipped (no header, ``", "``
    separated, ``?`` = missing, test labels with a trailing dot)."""
    import pandas as pd

    if part not in ("train", "test"):
        raise InputError("part must be 'train' or 'test'")
    path = data_file("adult", "adult.data.gz" if part == "train" else "adult.test.gz")
    df = pd.read_csv(
        path,
        header=None,
        names=ADULT_COLUMNS,
        sep=r",\s*",
        engine="python",
        na_values="?",
        skiprows=1 if part == "test" else 0,
        compression="gzip",
    )
    df = df.dropna(subset=["income"])
    df["income"] = df["income"].str.rstrip(".").map({"<=50K": 0, ">50K": 1}).astype(np.int8)
    return df


def adult_scores(seed: int = 0) -> tuple[FloatArray, Int8Array]:
    """Scores of a gradient-boosting model trained on Adult's training part, on its test part
    (16,281 real scores in [0, 1] with their labels)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    train, test = load_adult("train"), load_adult("test")
    cats = {c: pd_categories(train[c]) for c in ADULT_CATEGORICAL}

    def encode(df: Any) -> Any:
        x = df.drop(columns=["income"]).copy()
        for c, values in cats.items():
            x[c] = x[c].map({v: i for i, v in enumerate(values)}).astype("float64")
        return x.to_numpy(dtype=np.float64)

    features = [c for c in ADULT_COLUMNS if c != "income"]
    model = HistGradientBoostingClassifier(
        categorical_features=[features.index(c) for c in ADULT_CATEGORICAL],
        max_iter=200,
        random_state=seed,
    )
    model.fit(encode(train), train["income"].to_numpy())
    scores = model.predict_proba(encode(test))[:, 1]
    return np.clip(scores.astype(np.float64), 0.0, 1.0), test["income"].to_numpy(dtype=np.int8)


def pd_categories(column: Any) -> list[Any]:
    """Sorted distinct non-missing values of a pandas column."""
    return sorted(v for v in column.dropna().unique())


def _codes(df: Any) -> Any:
    """Categorical (object) columns as integer codes, numeric ones as floats."""
    import pandas as pd

    out = df.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]):
            out[c] = out[c].astype("category").cat.codes.astype("float64")
    return out.astype("float64")


@dataclass(frozen=True, eq=False)
class TabularDataset:
    """A RevFRF benchmark dataset: float feature matrices (categorical columns as integer
    codes), targets, the feature names and a one-line description."""

    name: str
    task: str
    x_train: npt.NDArray[np.float64]
    y_train: npt.NDArray[Any]
    x_test: npt.NDArray[np.float64]
    y_test: npt.NDArray[Any]
    features: tuple[str, ...]
    description: str

    @property
    def n_features(self) -> int:
        return len(self.features)


def load_tabular(name: str, seed: int = 0) -> TabularDataset:
    """A RevFRF benchmark dataset (see :class:`TabularDataset`).

    Classification: ``adult`` (income > 50K; UCI train/test split), ``bank`` (bank-full, y),
    ``wine`` (red + white, quality as class; colour as a feature), ``drug`` (cannabis use in
    the last year, CL3-CL6, from the 12 personality/demographic features).
    Regression: ``appliances`` (Appliances Wh), ``coil2000`` (CARAVAN, UCI train/eval split),
    ``bike`` (hourly cnt). Without a given split, 30% of the rows are held out (seeded)."""
    if name not in TABULAR_DATASETS:
        raise InputError(f"unknown dataset {name!r}; choose from {', '.join(TABULAR_DATASETS)}")
    import pandas as pd
    from sklearn.model_selection import train_test_split

    def dataset(task: str, xtr: Any, ytr: Any, xte: Any, yte: Any, desc: str) -> TabularDataset:
        return TabularDataset(
            name, task, np.asarray(xtr, dtype=np.float64), np.asarray(ytr),
            np.asarray(xte, dtype=np.float64), np.asarray(yte), tuple(map(str, xtr.columns)), desc,
        )  # fmt: skip

    def split(x: Any, y: Any, task: str, desc: str) -> TabularDataset:
        strat = y if task == "classification" else None
        xtr, xte, ytr, yte = train_test_split(
            x, y, test_size=0.3, random_state=seed, stratify=strat
        )
        return dataset(task, xtr, ytr, xte, yte, desc)

    if name == "adult":
        tr, te = load_adult("train"), load_adult("test")
        both = _codes(pd.concat([tr, te]).drop(columns=["income"]).fillna("missing"))
        return dataset(
            "classification", both.iloc[: len(tr)], tr["income"].to_numpy(), both.iloc[len(tr) :],
            te["income"].to_numpy(), "UCI Adult, income > 50K (train 32,561 / test 16,281)",
        )  # fmt: skip
    if name == "bank":
        df = pd.read_csv(data_file("bank_marketing", "bank-full.csv.gz"), sep=";")
        y = (df.pop("y") == "yes").astype(int).to_numpy()
        return split(_codes(df), y, "classification", "UCI Bank Marketing (bank-full), subscribed")
    if name == "wine":
        cols = [
            "fixed_acidity",
            "volatile_acidity",
            "citric_acid",
            "residual_sugar",
            "chlorides",
            "free_sulfur_dioxide",
            "total_sulfur_dioxide",
            "density",
            "pH",
            "sulphates",
            "alcohol",
            "quality",
        ]
        red = pd.read_csv(data_file("wine_quality", "winequality-red.csv"), header=None, names=cols)
        white = pd.read_csv(
            data_file("wine_quality", "winequality-white.csv.gz"), header=None, names=cols
        )
        red["red"], white["red"] = 1.0, 0.0
        df = pd.concat([red, white], ignore_index=True)
        y = df.pop("quality").to_numpy()
        return split(
            df.astype("float64"),
            y,
            "classification",
            "UCI Wine Quality (red + white), quality class",
        )
    if name == "drug":
        df = pd.read_csv(data_file("drug_consumption", "drug_consumption.data.gz"), header=None)
        x = df.iloc[:, 1:13].astype("float64")
        x.columns = [
            "age",
            "gender",
            "education",
            "country",
            "ethnicity",
            "nscore",
            "escore",
            "oscore",
            "ascore",
            "cscore",
            "impulsive",
            "ss",
        ]
        y = df.iloc[:, 18].isin(["CL3", "CL4", "CL5", "CL6"]).astype(int).to_numpy()
        return split(x, y, "classification", "UCI Drug Consumption, cannabis used in the last year")
    if name == "appliances":
        df = pd.read_csv(data_file("appliances_energy", "energydata_complete.csv.gz"))
        y = df.pop("Appliances").astype("float64").to_numpy()
        return split(
            df.drop(columns=["date"]).astype("float64"),
            y,
            "regression",
            "UCI Appliances Energy, Appliances (Wh)",
        )
    if name == "coil2000":
        tr = pd.read_csv(data_file("coil2000", "ticdata2000.txt.gz"), sep="\t", header=None)
        te = pd.read_csv(data_file("coil2000", "ticeval2000.txt.gz"), sep="\t", header=None)
        yte = pd.read_csv(data_file("coil2000", "tictgts2000.txt"), header=None)[0].to_numpy()
        xtr = tr.iloc[:, :85].astype("float64")
        xtr.columns = [f"v{i + 1}" for i in range(85)]
        xte = te.astype("float64")
        xte.columns = xtr.columns
        return dataset(
            "regression", xtr, tr[85].to_numpy(dtype=float), xte, yte.astype(float),
            "UCI COIL 2000, CARAVAN (train 5,822 / eval 4,000)",
        )  # fmt: skip
    if name == "bike":
        df = pd.read_csv(data_file("bike_sharing", "hour.csv.gz"))
        y = df["cnt"].astype("float64").to_numpy()
        x = df.drop(columns=["instant", "dteday", "casual", "registered", "cnt"]).astype("float64")
        return split(x, y, "regression", "UCI Bike Sharing (hourly), cnt")
    raise InputError(
        f"unknown dataset {name!r}; choose from adult, bank, wine, drug, appliances, coil2000, bike"
    )


TABULAR_DATASETS = ("adult", "bank", "wine", "drug", "appliances", "coil2000", "bike")
