DROP TABLE prompt_library;
