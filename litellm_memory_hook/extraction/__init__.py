"""The extraction job: the prompt, tolerant parsing and cleaning of the model's JSON, the worker."""
