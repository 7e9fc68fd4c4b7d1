export { harborTaskSubmission, isHarborTaskDir, readHarborTaskDir, readHarborTaskDirFiles } from './harbor-task-dir.reader.js';
