DROP INDEX prompt_library_owner;
DROP INDEX prompt_library_newest;
