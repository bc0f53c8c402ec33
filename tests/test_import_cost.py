"""A job imports only what it uses: each job kind's modules, imported in a fresh interpreter,
leave out the heavy libraries that kind never needs (start-up time: 79 jobs in the default
profile, each a new process on a small, busy CPU).

- `drmas --help`, `drmas train --help`: no torch, transformers, pandas, plotting;
- prepare: no torch, transformers or pandas; the tokenizer job: no torch (only `tokenizers`
  and transformers' tokenizer class), also while it trains and saves a tokenizer;
- train, evaluate: no `torch.distributed.checkpoint` (a single worker never needs it before it
  saves a checkpoint; an evaluation never), no plotting, no scikit-learn at import; train
  imports no pandas (evaluate aggregates its samples with it);
- a model job, once its process is prepared (`drmas.models.startup.prepare_process`): no
  scikit-learn and no SciPy when it builds a transformers model with its generation utilities
  and its model classes (transformers would import them for assisted decoding and for the
  object-detection losses), and both still importable;
- the report jobs: tables no torch and no plotting, card and verify no torch, pandas or
  plotting at import (`drmas card` imports torch for the numerics fingerprint when it runs it).
"""

import json
import subprocess
import sys

import pytest

from repo import REPO

HEAVY = ("torch", "torch.distributed.checkpoint", "torch.distributed.tensor", "transformers",
         "pandas", "sklearn", "scipy", "matplotlib", "seaborn")
PLOTTING = ("matplotlib", "seaborn")
JOB = "import drmas.cli.main, drmas.cli.job, drmas.config.profile, drmas.config.suites, drmas.data.io\n"
HELP = "from drmas.cli.main import main\ntry:\n    main({argv})\nexcept SystemExit:\n    pass\n"

CASES = {
    "drmas --help": (HELP.format(argv="['--help']"), ("torch", "transformers", "pandas", *PLOTTING)),
    "drmas train --help": (HELP.format(argv="['train', '--help']"),
                           ("torch", "transformers", "pandas", *PLOTTING)),
    "prepare": (JOB + "import drmas.data.prepare\nfrom drmas.registry import GENERATORS\n"
                      "GENERATORS.names()\n",
                ("torch", "transformers", "pandas", "sklearn", *PLOTTING)),
    "tokenizer": (JOB + "import tempfile\nimport drmas.rollout.mas\nfrom drmas.registry import "
                        "DEMONSTRATIONS\nDEMONSTRATIONS.names()\n"
                        "from drmas.models.tiny import train_tokenizer\n"
                        "tok = train_tokenizer(['user\\n2 + 3 = ?\\nassistant\\n5'] * 20, 300)\n"
                        "tok.save_pretrained(tempfile.mkdtemp())\n",
                  ("torch", "pandas", "sklearn", *PLOTTING)),
    "train": (JOB + "import torch\nimport drmas.train.trainer, drmas.train.workers\n"
                    "from drmas.train import dist\n"
                    # the single-worker helpers run without torch.distributed.checkpoint
                    "model = torch.nn.Linear(2, 2)\n"
                    "dist.load_full_state(model, model.state_dict(), sharded=False)\n"
                    "assert dist.all_sum([1.0]) == [1.0] and dist.world_size() == 1\n",
              ("torch.distributed.checkpoint", "pandas", "sklearn", *PLOTTING)),
    "evaluate": (JOB + "import drmas.cli.inputs, drmas.evaluation.runner\n",
                 ("torch.distributed.checkpoint", "sklearn", *PLOTTING)),
    "model job": (JOB + "from drmas.models.startup import prepare_process\nprepare_process(1)\n"
                        "from drmas.bench.models import SHAPES\nfrom drmas.models.tiny import tiny_model\n"
                        "import transformers.generation.utils\n"
                        "import transformers.models.qwen2.modeling_qwen2\n"
                        "import transformers.models.llama.modeling_llama\n"
                        "tiny_model(SHAPES['small'], 300, seed=0)\n",
                  ("torch.distributed.checkpoint", "pandas", "sklearn", "scipy", *PLOTTING)),
    "table": (JOB + "import drmas.cli.inputs, drmas.report.tables\n",
              ("torch", "transformers", "sklearn", *PLOTTING)),
    "card, verify": (JOB + "import drmas.report.card, drmas.report.cardmd, drmas.report.verify\n",
                     ("torch", "transformers", "pandas", "sklearn", *PLOTTING)),
}


def imported(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running `code`."""
    tail = f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    proc = subprocess.run([sys.executable, "-c", code + tail], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("job", CASES)
def test_job_imports_only_what_it_uses(job):
    code, forbidden = CASES[job]
    extra = [m for m in imported(code) if m in forbidden]
    assert not extra, f"{job}: imports {extra} (find who with `python -X importtime`)"


def test_prepared_process_keeps_determinism_scikit_learn_and_scipy():
    """`prepare_process` sets threads and deterministic algorithms; hiding scikit-learn and
    SciPy from transformers' checks leaves both importable for others (pyserini's rerankers),
    also where transformers' own import asked for SciPy first."""
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    code = ("import sys, torch, transformers\nfrom drmas.models.startup import prepare_process\n"
            "prepare_process(1)\nimport transformers.generation.utils\n"
            "import transformers.models.qwen2.modeling_qwen2\n"
            "assert 'sklearn' not in sys.modules and 'scipy' not in sys.modules\n"
            "assert torch.get_num_threads() == 1\n"
            "assert torch.are_deterministic_algorithms_enabled()\n"
            "assert torch.is_deterministic_algorithms_warn_only_enabled()\n"
            "import sklearn.metrics, scipy.optimize\n")
    assert {"sklearn", "scipy"} <= set(imported(code))
