//! GPT-2 trainer.
