"""SQuAD v1.1, DAWNBench's question-answering task (0.75 F1). Its data is the user's copy of
the official JSON files (``source.py``), scored with the official EM/F1 (``scoring.py``);
smoke runs get synthetic articles (``synthetic.py``). Its entries may start from GloVe,
declared here as public inputs."""

from runner.tasks.base import (
    QUESTION_PROBE, QUESTIONS, CrossSeedLimits, DataSource, DawnbenchFormat, DescentLimits, PublicInput, Task,
)

# DAWNBench's SQuAD entries (DrQA, BiDAF) start from GloVe word vectors. Stanford NLP
# publishes no checksums; the SHA-1 digests of the official zips and of the text files in them
# are the ones Apache MXNet's text-embedding registry pins for the same URLs.
_GLOVE_DIGESTS = ("Apache MXNet's text-embedding registry (mxnet/contrib/text/_constants.py, "
                  "GLOVE_PRETRAINED_FILE_SHA1 and GLOVE_PRETRAINED_ARCHIVE_SHA1)")
PUBLIC_INPUTS = (
    PublicInput("glove.840B.300d", "GloVe, Common Crawl 840B tokens, 300d", "glove.840B.300d.zip",
                "8084fbacc2dee3b1fd1ca4cc534cbfff3519ed0d",
                (("glove.840B.300d.txt", "294b9f37fa64cce31f9ebb409c266fc379527708"),),
                "https://nlp.stanford.edu/data/glove.840B.300d.zip", _GLOVE_DIGESTS),
    PublicInput("glove.6B", "GloVe, Wikipedia 2014 + Gigaword 5, 6B tokens, 50/100/200/300d",
                "glove.6B.zip", "b64e54f1877d2f735bdd000c1d7d771e25c7dfdc",
                (("glove.6B.50d.txt", "21bf566a9d27f84d253e0cd4d4be9dcc07976a6d"),
                 ("glove.6B.100d.txt", "16b1dbfaf35476790bd9df40c83e2dfbd05312f1"),
                 ("glove.6B.200d.txt", "17d0355ddaa253e298ede39877d1be70f99d9148"),
                 ("glove.6B.300d.txt", "646443dd885090927f8215ecf7a677e9f703858d")),
                "https://nlp.stanford.edu/data/glove.6B.zip", _GLOVE_DIGESTS),
)

TASK = Task(
    "squad-v1.1", "f1", 0.75, 10_570, None, None, ("f1Score",),
    inputs=QUESTIONS, probe=QUESTION_PROBE, dawnbench="SQuAD",
    public_inputs=PUBLIC_INPUTS, chance_score=0.10,
    listed=50,
    source=DataSource(f"{__name__}.source", imported=True, extras=("train",),
                      how_to_stage="run `runner data import squad-v1.1 PATH/dev-v1.1.json`"),
    synthetic=f"{__name__}.synthetic:stage_articles",
    dawnbench_format=DawnbenchFormat("SQuAD", "f1Score", percent=False),
    mlperf_training="bert",
    scorer=f"{__name__}.scoring:score_task",
    smoke_words=f"{__name__}.synthetic:smoke_words",
    public_train_size=87_599,
    threshold_ladder=(70.0, 73.0, 75.0, 77.0),  # F1
    # GloVe's 300-wide word vectors start every run (fixed, or fine-tuned for the frequent
    # question words): alike by design, left out of the aligned weights. Mistakes are not
    # compared (answers are spans, not classes).
    cross_seed=CrossSeedLimits(public_width=300),
    descent=DescentLimits(evidence="calibration.md"),  # its limit in rules/: no full run here yet
)
