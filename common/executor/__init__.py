"""The Fact Executor's supervised fine-tuning: teacher samples, their review, the dataset and
the LoRA run (docs/llm.md, "Training the Fact Executor").

`samples` and `review` are light (the API's review routes read them); `teach` calls a
teacher model, `dataset` writes the SFT files and `train` imports torch and PEFT when it runs.
"""
