"""The loop both math MAS run (ARCHITECTURE.md, "Math MAS"), and its one option.

    for each loop (at most `max_loop`), on the episodes not yet approved:
        Solver; on the last loop stop here (its answer is final);
        the reviewers in order, the last of them a Verifier (`<verify>approve|reject</verify>`,
        missing = approve): only the episodes it rejects go round again.

The two-agent MAS (drmas/mas/math/) has the Verifier alone as its reviewers; the four-agent
MAS (drmas/mas/math4/) has Critic -> Refiner -> Verifier.
"""

from __future__ import annotations

from dataclasses import dataclass

from drmas.config.schema import opt
from drmas.mas.base import Act, Agent, Episode, MasOptions, call
from drmas.mas.prompting import PromptSet, pick


@dataclass(frozen=True)
class MathOptions(MasOptions):
    """The math MAS's options (`mas_options:` of benchmarks/math.yaml and math4.yaml)."""

    max_loop: int = opt(2, "at most this many Solver calls; the reviewers are skipped on the last", minimum=1)


class SolveReviewLoop:
    """A math orchestra: a subclass names its MAS (`name`), its roles and stats, and builds
    its Solver and its reviewers from a prompt set (`roles`); every agent's calls are batched
    across episodes."""

    name: str = ""
    options_class = MathOptions
    prompt_sets: dict[str, PromptSet] = {}

    def __init__(self, options: MathOptions = MathOptions(), *, prompt_set: str = "compact",
                 retriever=None):
        self.options = options
        self.solver, self.reviewers = self.roles(pick(self.prompt_sets, prompt_set, self.name))

    def roles(self, prompts: PromptSet) -> tuple[Agent, tuple[Agent, ...]]:
        """(Solver, reviewers in call order, the Verifier last)."""
        raise NotImplementedError

    @staticmethod
    def finish(episode: Episode) -> None:
        """The episode's answer and stats, once it is over (the MAS's `stats.finish`)."""
        raise NotImplementedError

    def run(self, problems: list[dict], act: Act) -> list[Episode]:
        episodes = [Episode(problem=p) for p in problems]
        active = episodes
        max_loop = self.options.max_loop
        for loop in range(max_loop):
            call(act, self.solver, active, turn=loop)
            if loop == max_loop - 1:
                break
            for reviewer in self.reviewers[:-1]:
                call(act, reviewer, active, turn=loop)
            verdicts = call(act, self.reviewers[-1], active, turn=loop)
            active = [ep for ep, v in zip(active, verdicts) if v.value == "reject"]
        for ep in episodes:
            self.finish(ep)
        return episodes
