"""The slackwise adapter: admission, deadlines, batching and the command line."""
